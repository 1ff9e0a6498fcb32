"""scripts/pip_conf_for_uv.py: pip's package sources as uv options (scripts/setup.sh), so
that uv installs from where pip would."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pip_conf_for_uv.py"
spec = importlib.util.spec_from_file_location("pip_conf_for_uv", SCRIPT)
conf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conf)


def pairs(options):
    """[(flag, value), ...] from a flat option list (flags without a value: value None)."""
    out, it = [], iter(options)
    for flag in it:
        out.append((flag, None) if flag == "--no-index" else (flag, next(it)))
    return out


def test_every_source_and_each_of_several_values():
    listing = ("global.cert='/etc/ssl/certs/ca.crt'\n"
               "global.extra-index-url='file:///a/simple file:///b/simple'\n"
               "global.find-links='/opt/wheels'\n"
               "global.constraint='/etc/pip/c.txt'\n"
               "global.index-url='https://mirror.example/simple'\n"
               "global.timeout='60'\n")
    assert pairs(conf.uv_options(listing)) == [
        ("--index-url", "https://mirror.example/simple"),
        ("--extra-index-url", "file:///a/simple"), ("--extra-index-url", "file:///b/simple"),
        ("--find-links", "/opt/wheels"), ("--constraint", "/etc/pip/c.txt")]


def test_a_variable_overrides_a_file_whatever_the_order_of_the_lines():
    lines = ["global.find-links='/from/global'", "user.find-links='/from/user'",
             ":env:.find-links='/from/env'"]
    for order in (lines, lines[::-1], lines[1:] + lines[:1]):
        assert pairs(conf.uv_options("\n".join(order))) == [("--find-links", "/from/env")]
    assert pairs(conf.uv_options("\n".join(lines[:2]))) == [("--find-links", "/from/user")]


def test_no_index_only_when_set_true_and_nothing_from_an_empty_listing():
    assert pairs(conf.uv_options(":env:.no-index='true'")) == [("--no-index", None)]
    assert conf.uv_options(":env:.no-index='false'") == []
    assert conf.uv_options("") == []
    assert conf.uv_options("not a config line\nglobal.find-links") == []


def test_the_script_prints_one_option_per_line_for_this_pip():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         check=True).stdout
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True).stdout
    assert out.splitlines() == conf.uv_options(listing)
    assert "" not in out.splitlines()  # an empty line would reach uv as an empty argument
