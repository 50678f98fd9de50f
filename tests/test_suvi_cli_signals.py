"""suvi-fill's edge under signals: Ctrl-C in the first second (while a subcommand's module
is still importing torch) is one line and exit 130, SIGTERM there is one line and exit
143 — no traceback either way.  A stand-in `torch` that blocks on import holds the
command at exactly that point."""
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT

BLOCKING_TORCH = "import sys, time\nprint('importing torch', file=sys.stderr, flush=True)\ntime.sleep(60)\n"


@pytest.mark.parametrize("sent,status,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_while_torch_imports_is_one_line(tmp_path, sent, status, word):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(BLOCKING_TORCH)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}",
               PYTHONWARNINGS="ignore:pkg_resources is deprecated:UserWarning")
    command = [sys.executable, "-c", "import sys; from suvi_fill.cli import main; sys.exit(main())",
               "train", "--shards", str(tmp_path), "--manifest", str(tmp_path / "manifest.json"), "--out", str(tmp_path / "o")]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert process.stderr.readline().strip() == "importing torch"      # held inside the import
    time.sleep(0.2)
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == status
    assert stderr.strip() == f"suvi-fill train: {word}" and "Traceback" not in stderr
