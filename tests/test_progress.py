"""Progress lines: drawn on a terminal, silent in CI and pipes."""

import io

import pytest

from pto_core.progress import Phases, Progress, progress_enabled, scons_progress_callback


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    for var in ("CI", "PTO_PROGRESS", "TERM"):
        monkeypatch.delenv(var, raising=False)


def test_terminal_gets_a_self_overwriting_line_that_is_cleared():
    out = FakeTTY()
    with Progress(3, "compile", stream=out, interval=0) as p:
        for name in ("rowmax", "rowsum", "exp"):
            p.advance(item=name)
    text = out.getvalue()
    assert "[1/3] compile: rowmax" in text and "[3/3] compile: exp" in text
    assert "\n" not in text and text.endswith("\r")


def test_pipe_and_ci_stay_silent(monkeypatch):
    pipe = io.StringIO()
    with Progress(2, "x", stream=pipe, interval=0) as p:
        p.advance(2)
    assert pipe.getvalue() == "" and p.done == 2
    monkeypatch.setenv("CI", "true")
    assert not progress_enabled(FakeTTY())
    assert scons_progress_callback(FakeTTY()) is None


def test_environment_can_force_progress_on_or_off(monkeypatch):
    monkeypatch.setenv("PTO_PROGRESS", "1")
    assert progress_enabled(io.StringIO())
    monkeypatch.setenv("PTO_PROGRESS", "0")
    assert not progress_enabled(FakeTTY())


def test_an_unknown_value_of_the_environment_is_said_once_and_ignored(monkeypatch):
    monkeypatch.setenv("PTO_PROGRESS", "Maybe")
    with pytest.warns(RuntimeWarning, match="PTO_PROGRESS='maybe' is none of 0/no/off/false"):
        assert progress_enabled(FakeTTY()) and not progress_enabled(io.StringIO())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        progress_enabled(FakeTTY())                # said already: no second warning


def test_scons_callback_shows_the_node_on_a_terminal():
    out = FakeTTY()
    cb = scons_progress_callback(out)
    cb.progress.interval = 0
    cb("build/arm64/softmax.o")
    assert "scons: build/arm64/softmax.o" in out.getvalue()


def test_scons_clears_its_progress_line_before_echoing_a_command(capsys):
    out = FakeTTY()
    cb = scons_progress_callback(out)
    cb.progress.interval = 0
    cb("build/arm64/softmax.os")
    assert out.getvalue().startswith("\r[1] scons: build/arm64/softmax.os")
    cb.print_cmd_line("gcc -o build/arm64/softmax.os -c softmax.c", None, None, None)
    # the line is blanked and the cursor returned before the command goes to stdout
    assert out.getvalue().endswith("\r" + " " * len("[1] scons: build/arm64/softmax.os") + "\r")
    assert capsys.readouterr().out == "gcc -o build/arm64/softmax.os -c softmax.c\n"


def test_phases_keep_their_times_and_notes_and_stay_silent_off_a_terminal():
    pipe = io.StringIO()
    with Phases(stream=pipe) as ph:
        with ph.phase("codegen", total=2) as step:
            step("a")
            step("b")
        with ph.phase("codegen", total=1) as step:        # entered again: the times add up
            step("c")
        ph.skip("build", "cached")
    assert pipe.getvalue() == "" and not ph.enabled
    assert list(ph.seconds) == ["codegen", "build"] and ph.seconds["build"] == 0.0
    assert ph.summary().startswith("codegen ") and ph.summary().endswith("build 0 ms (cached)")


def test_phases_draw_counted_bars_on_a_terminal():
    tty = FakeTTY()
    with Phases(stream=tty) as ph:
        assert ph.enabled
        with ph.phase("build", total=2, label="build arm64") as step:
            step("rowmax.os")
            step("softmax.os")
            step("late.os")                               # past the estimate: the total grows
    text = tty.getvalue()
    assert "build arm64" in text and "3/3" in text and "late.os" in text
