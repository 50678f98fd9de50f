"""suvi-fill realism: the real references reproduce the published figures, the command
prints the comparison for a synthetic archive, refuses a folder without frames in one
line, and --strict turns a missed goal into exit 1."""
import re

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.sim import realism


def test_the_real_references_give_the_published_figures():
    aia = realism.read_image(realism.references() / realism.AIA_171)
    figures = realism.disk_figures(aia)
    published = {"median 0.95-0.99 R / inside 0.5 R": 2.04, "median 1.02-1.06 R / inside 0.5 R": 1.72,
                 "median 1.10-1.15 R / inside 0.5 R": 0.25, "median 1.25-1.30 R / inside 0.5 R": 0.059,
                 "std log10 I inside 0.8 R": 0.27, "power-spectrum slope, inner disk": -2.6}
    for name, value in published.items():
        assert figures[name] == pytest.approx(value, rel=0.05), name


def test_a_smooth_disk_fails_and_the_reference_passes():
    aia = realism.read_image(realism.references() / realism.AIA_171)
    eit = realism.read_image(realism.references() / realism.EIT_195)
    assert all(row["ok"] for row in realism.compare([aia], [eit]))
    rho = realism.rho(aia)
    smooth = realism.SolarImage(np.where(rho < 1, 100.0, 100.0 * np.exp(-(rho - 1) * 5)), aia.centre, aia.radius, aia.arcsec)
    rows = {row["figure"]: row for row in realism.compare([smooth], [])}
    assert not rows["171: median 1.25-1.30 R / inside 0.5 R"]["ok"] and not rows["171: std log10 I inside 0.8 R"]["ok"]


def test_the_eit_reference_is_a_rebinned_full_disk():
    "The EIT file's header keeps the unbinned 1024-px scale; read back it is the full disk at 21 arcsec/px."
    eit = realism.read_image(realism.references() / realism.EIT_195)
    assert eit.arcsec == pytest.approx(2.63 * 8) and eit.radius == pytest.approx(372.27 / 8)
    assert eit.radius * eit.arcsec == pytest.approx(979, abs=1)     # the Sun's radius seen from SOHO that day
    rho = realism.rho(eit)
    limb = np.median(eit.data[(rho > 0.95) & (rho < 0.99)]) / np.median(eit.data[rho < 0.5])
    assert limb > 1.8                                    # limb brightening inside the limb
    profile = [np.median(eit.data[(rho >= a) & (rho < a + 0.03)]) for a in np.arange(0.80, 1.25, 0.03)]
    assert 0.95 <= 0.80 + 0.03 * int(np.argmax(profile)) <= 1.06   # the brightest ring is at the limb


def test_the_slope_is_not_measured_on_a_box_too_small_to_fit():
    aia = realism.read_image(realism.references() / realism.AIA_171)
    coarse = realism.at_scale(aia, 60.0)                # the demo's 64 px: an 18-px inner square
    rows = realism.compare([coarse], [])
    slope = next(r for r in rows if r["figure"].endswith(realism.SLOPE))
    assert slope["ok"] is None and "not measurable" in realism.table(rows)
    assert realism.goal_met(rows) and not realism.goal_met([slope])


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    out = tmp_path_factory.mktemp("realism") / "archive"
    result = run([tool("suvi-fill"), "synth", "--out", str(out), "--hours", "1", "--resolution", "128",
                  "--satellites", "16", "--outage-scale", "0", "--quiet"])
    assert result.returncode == 0, result.stderr
    return out


def test_the_command_prints_every_figure(archive):
    result = run([tool("suvi-fill"), "realism", "--source", str(archive), "--frames", "2"])
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 6 and all(re.search(r"\| -?\d+\.\d{3} \| -?\d+\.\d{3} \|", row) for row in rows)
    assert "Goal (every measurable figure within 25% of the real one):" in result.stdout
    assert sum(row.startswith("| 171: ") for row in rows) == 6 and sum(row.startswith("| 195: ") for row in rows) == 3


def test_strict_exits_1_when_the_goal_is_missed(archive):
    result = run([tool("suvi-fill"), "realism", "--source", str(archive), "--frames", "1", "--strict"])
    missed = "NOT met" in result.stdout
    assert result.returncode == (1 if missed else 0), result.stderr


def test_a_folder_without_frames_is_refused_in_one_line(tmp_path):
    result = run([tool("suvi-fill"), "realism", "--source", str(tmp_path)])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no 171 Å L2 FITS files" in result.stderr and str(tmp_path) in result.stderr
