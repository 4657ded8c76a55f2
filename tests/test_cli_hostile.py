"""`pto run` with hostile paths and options: a directory that cannot be written, tensor names
that would be paths, options a device program's run does not have - each a one-line error and
exit status 1, never a traceback, a file written outside the directory or an option dropped."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pto_core.cli import main

CHAIN = Path(__file__).resolve().parent / "device" / "chain.pto"
SETS = ("--set", "n=1", "--set", "twice=1")


def pto_run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["run", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("option", ["--output-dir", "--save"])
def test_a_directory_that_cannot_be_made_is_an_error(tmp_path, capsys, option):
    (tmp_path / "file").write_text("")
    rc, out, err = pto_run(capsys, CHAIN, *SETS, option, tmp_path / "file" / "out")
    assert rc == 1 and "Traceback" not in err
    assert f"cannot write the tensors to {tmp_path / 'file' / 'out'}/: Not a directory" in err


def workload_with_output(tmp_path, name: str) -> Path:
    """A workload file whose inputs() gives tensor ``x`` and a second one named ``name``."""
    wl = tmp_path / "wl.py"
    wl.write_text(textwrap.dedent(f"""\
        import numpy as np
        from pto_core.workload import Dense, Tensor, parallel_for, task
        x = Tensor("x")
        def inc(args):
            return 0
        def build_workload():
            return parallel_for(Dense(2), lambda i: task(inc, [x.update(i, 0, 1, 4)]))
        def inputs():
            return {{"x": np.zeros((2, 4), np.float32), {name!r}: np.ones((1, 1))}}
        """))
    return wl


def test_a_workload_files_tensor_names_cannot_write_outside_the_directory(tmp_path, capsys):
    wl = workload_with_output(tmp_path, "../escaped")
    rc, out, err = pto_run(capsys, wl, "--output-dir", tmp_path / "out")
    assert rc == 1, out + err
    assert "cannot write tensor '../escaped'" in err and "a tensor name is an identifier" in err
    assert not (tmp_path / "escaped.npy").exists()


def test_tensor_files_that_differ_only_in_case_are_refused_before_any_is_written(tmp_path, capsys):
    """On a case-insensitive file system (macOS, Windows) X.npy and x.npy are one file: the
    second would overwrite the first."""
    rc, out, err = pto_run(capsys, workload_with_output(tmp_path, "X"), "--output-dir",
                           tmp_path / "out")
    assert rc == 1, out + err
    assert "cannot write tensors 'x' and 'X'" in err and "differ only in case" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("options, named", [
    (("--trace", "t.json"), "--trace"), (("--stats",), "--stats"),
    (("--timeout", "5"), "--timeout"), (("--engine", "starpu"), "--engine"),
    (("--shape", "x=4x4", "--heap-bytes", "64"), "--shape, --heap-bytes")])
def test_options_a_device_programs_run_does_not_have_are_refused(tmp_path, capsys, options,
                                                                 named, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = pto_run(capsys, CHAIN, *SETS, *options)
    assert rc == 1 and f"device program 'main' takes no {named}" in err
    assert not (tmp_path / "t.json").exists() and "ran" not in out
    rc, out, err = pto_run(capsys, CHAIN, *SETS, "--output-dir", tmp_path / "o")
    assert rc == 0 and np.load(tmp_path / "o" / "z.npy").shape == (32, 16)


def test_refused_options_are_named_as_they_are_written(capsys):
    wl = Path(__file__).resolve().parents[1] / "examples" / "workloads" / "sequential_pairs.py"
    rc, out, err = pto_run(capsys, wl, "--input", "x=a.npy", "--shape", "x=1x1")
    assert rc == 1 and "a workload file takes no --input, --shape (" in err     # not --inputs


@pytest.mark.parametrize("argv", [["compile", CHAIN, "--emit", "pto", "-o", "{bad}"],
                                  ["parse", CHAIN, "-o", "{bad}/b.py"]])
def test_an_output_path_that_cannot_be_written_is_an_error(tmp_path, capsys, argv):
    (tmp_path / "file").write_text("")
    bad = str(tmp_path / "file" / "out")
    rc = main([str(a).format(bad=bad) for a in argv])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert f"pto {argv[0]}: error: {bad}" in err and ": Not a directory" in err


def test_perf_of_a_device_program_names_the_functions_it_could_report_on(capsys):
    rc = main(["perf", str(CHAIN), "--target", "arm64"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "'main', is a device program: pto perf reports on a function, name one with " \
           "--entry (twice_it, addexp)" in err


def test_graph_of_a_device_program_says_what_it_is(tmp_path, capsys):
    rc = main(["graph", str(CHAIN), "-o", str(tmp_path / "g.svg")])
    err = capsys.readouterr().err
    assert rc == 1 and "'main' of module 'chain' is a device program, not a function" in err
    assert not (tmp_path / "g.svg").exists()


# /dev/null has no program suffix: compile, run and graph refuse it by that (tested elsewhere)
@pytest.mark.parametrize("command, kind", [
    (c, k) for c in ("parse", "compile", "run", "graph") for k in ("empty", "blank", "dev-null", "fifo")
    if k != "dev-null" or c == "parse"])
def test_a_program_file_that_is_empty_or_no_regular_file_is_a_one_line_error(
        tmp_path, capsys, monkeypatch, command, kind):
    """Before: an empty file parsed as a module of nothing (pto parse wrote a builder of it),
    /dev/null was 'no such file or directory', and a pipe made compile and run wait for a
    writer for ever."""
    import os
    monkeypatch.chdir(tmp_path)
    path = {"dev-null": "/dev/null"}.get(kind, str(tmp_path / "p.pto"))
    if kind == "empty":
        Path(path).write_text("")
    elif kind == "blank":
        Path(path).write_text(" \n\t\n")
    elif kind == "fifo":
        os.mkfifo(path)
    extra = {"compile": ["-o", "out"], "graph": ["-o", "g.svg"]}.get(command, [])
    rc = main([command, path, *extra])
    err = capsys.readouterr().err
    why = {"empty": "is empty (or only white space): nothing to parse",
           "blank": "is empty (or only white space): nothing to parse",
           "dev-null": "not a regular file (a character device)",
           "fifo": "not a regular file (a pipe)"}[kind]
    assert rc == 1 and err.count("\n") == 1, err
    assert err.startswith(f"pto {command}: error: {path}:1:1: ") and why in err, err
    assert not list(tmp_path.glob("*_builder.py")) and not (tmp_path / "out").exists()


def test_a_python_program_that_is_a_pipe_is_refused(tmp_path, capsys):
    import os
    os.mkfifo(tmp_path / "p.py")
    rc = main(["run", str(tmp_path / "p.py")])
    assert rc == 1 and f"{tmp_path / 'p.py'}: not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("compile = 3\n", "[compile] is a table (compile = 3)"),
    ("passes = 'x'\n", "[passes] is a table (passes = 'x')"),
    ("[compile]\nopt_level = 'two'\n", "opt_level is 0, 1 or 2, got 'two'"),
    ("[compile]\nopt_level = 7\n", "opt_level is 0, 1 or 2, got 7"),
    ("[compile]\nopt_level = -1\n", "opt_level is 0, 1 or 2, got -1"),
    ("[compile]\nopt_level = true\n", "opt_level is 0, 1 or 2, got True"),
    ("[compile]\nopt_level = 1.5\n", "opt_level is 0, 1 or 2, got 1.5"),
    ("[compile]\nopt_level = [1]\n", "opt_level is 0, 1 or 2, got [1]"),
    ("[compile]\nopt_levle = 1\n", "unknown key 'opt_levle' in [compile] (known: opt_level)"),
    ("[pases]\nfuse_loops = false\n", "unknown table [pases] (known: compile, passes)"),
    ("opt_level = 1\n", "unknown key 'opt_level' (known: compile, passes)"),
    ("[passes]\nfuse_loops = 'false'\n", "[passes] fuse_loops is true or false, got 'false'"),
    ("[passes]\nfuse_loops = 0\n", "[passes] fuse_loops is true or false, got 0"),
    ("[passes]\nfuse_loop = false\n", "unknown pass 'fuse_loop'"),
    (b"[compile]\nopt_level = 1 # \xff\n", "not UTF-8 text"),
    ("[compile\n", "Expected ']'"),
])
def test_a_config_file_with_wrong_keys_types_or_values_is_a_one_line_error(tmp_path, capsys,
                                                                          text, message):
    """Before: a table that was a value, a wrong type or a file not in UTF-8 was a traceback;
    an opt_level out of range, a misspelt key or table and a pass switched by the string
    'false' (which switched it on) passed silently."""
    cfg = tmp_path / "pto.toml"
    (cfg.write_bytes if isinstance(text, bytes) else cfg.write_text)(text)
    rc = main(["compile", str(CHAIN), "--emit", "pto", "-o", str(tmp_path / "out"),
               "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert err.startswith(f"pto compile: error: {cfg}: ") and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_config_file_sets_the_level_and_the_passes(tmp_path, capsys):
    cfg = tmp_path / "pto.toml"
    cfg.write_text("[compile]\nopt_level = 0\n[passes]\nfuse_loops = true\ndce = false\n")
    from pto_core.commands.common import add_compile_arguments, options_from_args
    import argparse
    p = argparse.ArgumentParser()
    add_compile_arguments(p)
    opts = options_from_args(p.parse_args(["--config", str(cfg)]))
    assert (opts.opt_level, opts.enable, opts.disable) == (0, {"fuse_loops"}, {"dce"})
    opts = options_from_args(p.parse_args(["--config", str(cfg), "-O", "2", "--pass", "dce"]))
    assert (opts.opt_level, opts.enable, opts.disable) == (2, {"fuse_loops", "dce"}, set())


def test_a_program_of_comments_alone_has_nothing_to_run(tmp_path, capsys):
    """Before: "no function 'None' to run"."""
    (tmp_path / "c.pto").write_text("// PTO Module: m\n// Entry\n")
    rc = main(["run", str(tmp_path / "c.pto")])
    err = capsys.readouterr().err
    assert rc == 1 and err == (f"pto run: error: {tmp_path / 'c.pto'}: module 'm' has no "
                               f"function or device program to run\n"), err


ROWMAX = Path(__file__).resolve().parents[1] / "examples" / "rowmax.py"


@pytest.mark.parametrize("options, message", [
    (("--seed", "-1"), "--seed: expected a whole number >= 0, got -1"),
    (("--check", "--rtol", "nan"), "--rtol: expected a number >= 0, got nan"),
    (("--check", "--atol", "-1"), "--atol: expected a number >= 0, got -1.0"),
    (("--check", "--rtol", "inf"), "--rtol: expected a number >= 0, got inf"),
    (("--workers", "-1"), "--workers: expected a whole number in [0, 128], got -1"),
    (("--workers", "99999999999"), "--workers: expected a whole number in [0, 128], got "
                                   "99999999999"),
])
def test_run_options_out_of_range_are_a_one_line_error(capsys, options, message):
    """Before: --seed -1 was a numpy ValueError traceback; a tolerance of nan or -1 compared
    and reported MISMATCH; --workers was wrapped to 32 bits before the runtime refused it
    (99999999999 was 'num_workers = 1215752191') and ignored on the reference target."""
    rc, out, err = pto_run(capsys, ROWMAX, *options)
    assert rc == 1 and err == f"pto run: error: {message}\n", err
    assert "ran in" not in out


@pytest.mark.parametrize("content", [b"", b"\x93NUMPY\x01\x00", b"not numpy at all"])
def test_an_input_file_that_is_no_npy_is_a_one_line_error(tmp_path, capsys, content):
    """Before: an empty file (or /dev/null) was an EOFError traceback."""
    (tmp_path / "x.npy").write_bytes(content)
    rc, out, err = pto_run(capsys, ROWMAX, "--input", f"input={tmp_path / 'x.npy'}")
    assert rc == 1 and err.count("\n") == 1, err
    assert err.startswith(f"pto run: error: --input input: cannot read {tmp_path / 'x.npy'}: ")


def test_a_shape_past_max_dim_is_refused_by_name(capsys):
    """Before: accepted (larger than the accesses), then allocating the tensor failed."""
    from pto_core.ir import MAX_DIM
    rc, out, err = pto_run(capsys, ROWMAX, "--shape", "input=99999999999x128")
    assert rc == 1 and err == (f"pto run: error: --shape input: at most {MAX_DIM} rows and "
                               f"columns, got 99999999999x128\n"), err


def test_a_python_program_that_does_not_parse_is_a_located_one_line_error(tmp_path, capsys):
    """Before: Python's SyntaxError traceback (through importlib)."""
    (tmp_path / "p.py").write_text("import numpy\n\ndef build_module(:\n    pass\n")
    rc = main(["run", str(tmp_path / "p.py")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert re.fullmatch(rf"pto run: error: {re.escape(str(tmp_path / 'p.py'))}:3:\d+: .+\n", err)


@pytest.mark.parametrize("command", ["run", "graph", "compile"])
def test_a_python_program_with_a_byte_not_utf8_is_read_as_python_reads_it(tmp_path, capsys,
                                                                         command):
    """Before: pto run ended in a UnicodeDecodeError traceback from telling a workload file
    from a program file (the others loaded it)."""
    (tmp_path / "p.py").write_bytes(b"def build_module():\n    pass\n# \xff\n")
    extra = {"compile": ["-o", str(tmp_path / "o")], "graph": ["-o", str(tmp_path / "g.svg")]}
    rc = main([command, str(tmp_path / "p.py"), *extra.get(command, [])])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1, err
    assert "build_module() returned NoneType, not a PTOModule" in err


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("role", ["pto.toml", "--config", "--input"])
def test_a_config_or_input_file_that_is_a_pipe_or_a_device_is_refused(tmp_path, capsys,
                                                                      monkeypatch, role, kind):
    """Before: a pipe named pto.toml (or given to --config or --input) made the command wait
    for a writer for ever, and /dev/zero was read without end."""
    import os
    monkeypatch.chdir(tmp_path)
    path = "/dev/zero" if kind == "dev-zero" else str(tmp_path / "f")
    if kind == "fifo":
        os.mkfifo(path)
    if role == "pto.toml":
        (tmp_path / "pto.toml").symlink_to(path)
        path = "pto.toml"
    argv = {"pto.toml": [], "--config": ["--config", path],
            "--input": ["--input", f"input={path}"]}[role]
    rc, out, err = pto_run(capsys, ROWMAX, "--target", "reference", *argv)
    what = "a pipe" if kind == "fifo" else "a character device"
    assert rc == 1 and err.count("\n") == 1, err
    assert f"{path}: not a regular file ({what})" in err, err
