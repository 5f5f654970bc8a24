"""Progress on stderr: whole lines when it is not a terminal, off with
--no-progress (`symphys.progress`)."""

import time

from symphys import progress
from symphys.cli.main import build_parser, main
from symphys.experiments.common import progress as experiment_bar


def test_a_bar_into_a_pipe_writes_whole_lines_not_one_growing_line(capsys):
    bar = experiment_bar(range(500), "gradient", total=500)
    for i in bar:
        bar.set_postfix(loss=f"{1 / (i + 1):.4f}")
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n")
    lines = err.splitlines()
    # a line at the start and one at the end (and one per 10 s between)
    assert 2 <= len(lines) < 10 and "500/500" in lines[-1], lines


def test_waiting_says_how_long_it_took(capsys):
    with progress.waiting("compiling a thing", period=0.01, announce=True):
        time.sleep(0.05)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "symphys: compiling a thing"
    assert lines[-1].startswith("symphys: compiling a thing: done in ")


def test_no_progress_is_an_option_of_every_command_and_silences_progress(capsys, monkeypatch):
    commands = build_parser()._subparsers._group_actions[0].choices
    assert all("--no-progress" in p._option_string_actions for p in commands.values())
    seen = []
    monkeypatch.setattr("symphys.cli.main._cmd_list",
                        lambda args: seen.append(progress.enabled()) or progress.say("x") or 0)
    assert main(["list", "--no-progress"]) == 0 and main(["list"]) == 0
    assert seen == [False, True]
    assert capsys.readouterr().err == "symphys: x\n"
