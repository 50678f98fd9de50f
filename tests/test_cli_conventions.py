"""One convention for both command lines: every subcommand takes --quiet and --traceback after its
name, every option has help that shows its default, every --help ends with the exit codes, progress
piped to a file is plain lines (no carriage returns), and the README and project files say what is so."""
from __future__ import annotations

import argparse
import importlib
import re
from configparser import ConfigParser

import pytest

from helpers import ROOT, run, tool

CLIS = [("suvi_fill", "suvi-fill"), ("szrank", "szrank")]


def whole_parser(package: str, prog: str) -> argparse.ArgumentParser:
    "The command line with every subcommand's arguments loaded (as `run_cli` loads the chosen one)."
    cli = importlib.import_module(f"{package}.cli")
    parser, runner = cli.command_parser(prog, cli.DESCRIPTION, cli.COMMANDS, epilog=cli.EXIT_CODES)
    assert runner is None
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def shown_options(parser: argparse.ArgumentParser):
    "The options a --help lists (not -h itself, not a hidden old name)."
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            yield action


def required_argv(parser: argparse.ArgumentParser) -> list[str]:
    "A value for every required option and positional, so that the parser accepts the line."
    argv = []
    for action in parser._actions:
        if not (action.required or not action.option_strings) or isinstance(action, argparse._HelpAction):
            continue
        value = str(action.choices[0]) if action.choices else "1" if action.type in (int, float) else "x"
        argv += ([action.option_strings[0]] if action.option_strings else []) + [value]
    return argv


@pytest.mark.parametrize("package,prog", CLIS)
def test_every_subcommand_takes_quiet_and_traceback_after_its_name(package, prog):
    parser = whole_parser(package, prog)
    names = subcommands(parser)
    assert set(names) == {c.name for c in importlib.import_module(f"{package}.cli").COMMANDS}
    for name, sub in names.items():
        args = parser.parse_args([name, *required_argv(sub), "--quiet", "--traceback"])
        assert args.command == name and args.quiet is True and args.traceback is True, name
        plain = parser.parse_args([name, *required_argv(sub)])
        assert plain.quiet is False and plain.traceback is False, name
        assert parser.parse_args(["--traceback", name, *required_argv(sub)]).traceback is True, name


@pytest.mark.parametrize("package,prog", CLIS)
def test_every_option_has_help_that_shows_its_default(package, prog):
    missing = []
    for name, sub in subcommands(whole_parser(package, prog)).items():
        formatter = sub._get_formatter()
        for action in shown_options(sub):
            where = f"{prog} {name} {action.option_strings[0]}"
            if not (action.help or "").strip():
                missing.append(f"{where}: no help")
            elif action.nargs != 0 and not action.required and "default" not in formatter._get_help_string(action):
                missing.append(f"{where}: no default shown (default {action.default!r})")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("package,prog", CLIS)
def test_every_help_ends_with_the_exit_codes_the_code_uses(package, prog):
    cli = importlib.import_module(f"{package}.cli")
    if package == "suvi_fill":
        from suvi_fill.plumbing.errors import SuviFillError, TrainingAborted
        codes = {SuviFillError.status, TrainingAborted.status, cli.INTERRUPTED, cli.TERMINATED}
    else:
        from szrank.plumbing.errors import GATE_FAILED, INTERRUPTED, REFUSED, TERMINATED
        codes = {REFUSED, GATE_FAILED, INTERRUPTED, TERMINATED}
    listed = {int(m) for m in re.findall(r"^  (\d+) ", cli.EXIT_CODES, re.M)}
    assert codes <= listed and codes | {0, 1} == listed, (codes, listed)
    parser = whole_parser(package, prog)
    for name, sub in [("", parser), *subcommands(parser).items()]:
        assert sub.format_help().rstrip().endswith(cli.EXIT_CODES.rstrip()), f"{prog} {name} --help"
    result = run([tool(prog), "--help"])
    assert result.returncode == 0 and "exit codes:" in result.stdout and "143  terminated (SIGTERM)" in result.stdout


@pytest.mark.parametrize("argv", [["suvi-fill", "inspect", "--shards", "{missing}"],
                                  ["szrank", "inspect", "{missing}/none.sztx"]])
def test_traceback_after_the_subcommand_shows_it(argv, tmp_path):
    argv = [tool(argv[0]), *(a.format(missing=tmp_path / "missing") for a in argv[1:])]
    short = run(argv)
    assert short.returncode == 2 and "Traceback" not in short.stderr and len(short.stderr.strip().splitlines()) == 1
    full = run([*argv, "--traceback"])
    assert full.returncode != 0 and "Traceback (most recent call last)" in full.stderr, full.stderr


PIPED = {
    "suvi-fill": (["synth", "--out", "{tmp}/archive", "--hours", "2", "--resolution", "16"],
                  "SUVI_FILL_PROGRESS_SECONDS", r"^synth 16px: (\d+)/30 slot \(\d+%\), "),
    "szrank": (["search", "--archive", "{tmp}/runs", "--runs", "1", "--steps", "12", "--seed", "1", "--workers", "1"],
               "SZRANK_PROGRESS_SECONDS", r"^szrank search \(anneal\): (\d+)/12 step \(\d+%\), "),
}


@pytest.mark.parametrize("prog", sorted(PIPED))
def test_piped_progress_is_plain_periodic_lines(prog, tmp_path):
    "Output to a pipe: a line per period (0 here: every update), done/total, rate and time left, no carriage return."
    words, variable, pattern = PIPED[prog]
    argv = [tool(prog), *(a.format(tmp=tmp_path) for a in words)]
    result = run(argv, env={variable: "0"})
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "\r" not in result.stdout
    counts = [int(m.group(1)) for line in result.stderr.splitlines() if (m := re.match(pattern, line))]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[-1] > counts[0], result.stderr
    assert any(" left" in line for line in result.stderr.splitlines() if re.match(pattern, line))
    quiet = run([tool(prog), *(a.format(tmp=tmp_path / "quiet") for a in words), "--quiet"], env={variable: "0"})
    assert quiet.returncode == 0 and not re.search(pattern, quiet.stderr, re.M), quiet.stderr


@pytest.mark.parametrize("package,prog", CLIS)
def test_version_prints_what_a_bug_report_needs(package, prog):
    result = run([tool(prog), "version"])
    assert result.returncode == 0, result.stderr
    labels = [line.split(" ", 1)[0] for line in result.stdout.splitlines()]
    wanted = {"python", "platform", "numpy", "torch"} | ({"astropy", "sunpy", "opencv"} if package == "suvi_fill"
                                                          else {"numba"})
    assert labels[0] == package and wanted <= set(labels), labels


def test_readme_says_how_to_install_and_where_data_comes_from():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install suvi-szrank" not in readme and "suvi-szrank[" not in readme
    for needed in ('pip install .', 'pip install ".[suvi-fill]"', "pip wheel --no-deps -w dist .",
                   "https://data.ngdc.noaa.gov/platforms/solar-space-observing-satellites/goes/goes16/l2/data/",
                   "suvi-fill build --source", "suvi-fill train --shards", "suvi-fill fill --source", "exit codes",
                   "--quiet", "--traceback"):
        assert needed.lower() in readme.lower(), needed
    from suvi_fill.archive.fits import L2_NAME
    examples = re.findall(r"`(dr_suvi-l2-ci\d{3}_g\d{2}_s\w+_e\w+_v[\d-]+\.fits)`", readme)
    assert examples and all(L2_NAME.match(name) for name in examples), examples
    for code in ("130", "143"):
        assert re.search(rf"^\s*\| {code} \|", readme, re.M), code


def test_quickstart_demo_installs_only_the_suvi_fill_extra():
    script = (ROOT / ".ci" / "quickstart").read_text(encoding="utf-8")
    assert "extras=suvi-fill; [ \"$action\" = demo ] || extras=dev,sunpy" in script
    assert '-e ".[$extras]"' in script and "[dev,sunpy]\"" not in script


def test_project_files_license_citation_changelog():
    import yaml
    config = ConfigParser(delimiters=["="])
    config.read(ROOT / "settings.ini", encoding="utf-8")
    settings = config["DEFAULT"]
    assert settings["license"] == "apache2"
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert citation["message"] and citation["title"] and citation["authors"]
    assert all("name" in a or "family-names" in a for a in citation["authors"])
    assert citation["license"] == "Apache-2.0" and str(citation["version"]) == settings["version"]
    assert citation["repository-code"] == settings["git_url"]
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog") and "## [Unreleased]" in changelog and "keepachangelog.com" in changelog
    for key in ("git_url", "doc_host"):
        assert "example.org" not in settings[key], key
    assert settings["git_url"].startswith("https://github.com/") and settings["doc_host"].endswith(".github.io")
