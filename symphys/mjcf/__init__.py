"""Scenes and MJCF, MuJoCo's model format."""
