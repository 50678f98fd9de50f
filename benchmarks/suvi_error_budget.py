"""Where the prior blend's error comes from, gap by gap, and how much of it any filler could win back.

The synthetic archive is drawn from a known Sun, so every frame of a bench sample can be rendered again
without noise (`Instrument.radiance` + the instrument's gain and offset, no shot or read noise) and put
on the corpus grid as the build puts it (`ingest.place`).  On the bench's own bracketed samples this
prints, per gap, display PSNR (the bench's mean over lost (sample, band)s):

- `blend`: the untrained net, the prior blend, against the stored target (the bench's figure);
- `noise floor`: the clean target against the stored one.  The stored target carries its own noise,
  which no filler can predict: no filler's mean can beat this row;
- `blend vs clean`: the blend against the clean target, its error without the target's noise;
- `clean inputs`: the blend of the sample's frames rendered without noise, each with its own pointing,
  through the same build and alignment, against the clean target;
- `registered inputs`: the same with every frame drawn with the target's pointing and placed with the
  target's headers.  The step from `clean inputs` is what the frames' different pointings cost once the
  build has resampled them onto one grid.  L2 files are Sun-centred and north-up, so the build moves
  nothing: the step is the L2 centring's residual, which no header records (`PointingModel`: jitter
  of 0.26" east-west and 0.50" north-south, about 0.01 px at 64 px);
- `oracle`: the clean Sun drawn with the target's pointing at the two bracketing frames' times (`gap`
  slots either side) and interpolated linearly in time, against the stored target; `oracle vs clean`
  the same against the clean target: the Sun's evolution alone.  The oracle holds the pointing still,
  not the Sun: it does not derotate, so at gaps of hours (64, 300) the Sun turns under it and it falls
  below the blend, which does.  At short gaps `oracle - blend` is what perfect registration and
  denoising of the neighbours would win; beyond the oracle lies knowing how the Sun changed.

A second table shows why a fraction of a pixel matters: the same instant rendered with the pointing
moved by `dx` pixels, display PSNR of the change, beside the first-order estimate from the frame's own
pixel differences (`|gradient| * dx`).  Where the change is far larger, the frame holds structure at
the pixel scale that its pixel differences do not show, and resampling a neighbour onto the target's
grid cannot undo the move exactly.

    .venv/bin/python benchmarks/suvi_error_budget.py --shards demo-out/suvi_fill/shards \\
        --archive demo-out/suvi_fill/archive [--split test] [--per-gap 32]

The archive must be the `suvi-fill synth` archive the shards were built from, drawn by this simulator
code (`simulator_digest`): the script checks that the archive's files of each target, placed on
the corpus grid, give back the stored target, and stops with a one-line error naming the sample when
they do not.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from suvi_fill.corpus import availability
from suvi_fill.evaluate import bench
from suvi_fill import demo
from suvi_fill.evaluate import fillers
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics.coding import SATURATION
from suvi_fill.sim.instrument import Instrument
from suvi_fill.sim.scene import SunModel
from suvi_fill.sim.synth import TRUTH_NAME, archive_path, simulator_digest
from suvi_fill.physics.coding import MSE_FLOOR, band_psnr, encode, to_display
from suvi_fill.corpus.reader import Corpus
from suvi_fill.physics.timebase import SLOT_SECONDS, WAVELENGTHS

ROWS = ("blend", "noise floor", "blend vs clean", "clean inputs", "registered inputs", "oracle", "oracle vs clean")
#: Largest difference (asinh-coded) between a stored target and the archive's files placed again that
#: still counts as the same frame: the shards' float16 step near code 1 is 4.9e-4.
SAME_FRAME_CODED = 2e-3


class Renderer:
    "The archive's Sun and instrument, from its `synth_truth.json`, and its files' headers (each read once)."

    def __init__(self, archive: Path, resolution: int):
        self.archive, self.resolution = archive, int(resolution)
        self._headers = {}                              # (satellite, slot, band index) -> header
        truth_path = archive / TRUTH_NAME
        try:
            truth = json.loads(truth_path.read_text())
            self.drawn = int(truth["resolution"])
            self.model = SunModel(seed=int(truth["seed"]), start=truth["start"], days=float(truth["days"]))
            self.instrument = Instrument(int(truth["seed"]))
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(f"{truth_path}: not a suvi-fill synth archive's truth file ({exc})") from None
        if truth.get("simulator") != simulator_digest():
            raise SystemExit(f"{truth_path}: drawn by another simulator ({truth.get('simulator')}, this code "
                             f"{simulator_digest()}); draw the archive again")

    def read(self, slot: int, satellite: int, bands=range(len(WAVELENGTHS))) -> dict:
        "`{band index: (radiance, header)}` of the band files of (`satellite`, `slot`) named by `bands`; keeps the headers."
        out = {}
        for b in bands:
            path = archive_path(self.archive, WAVELENGTHS[b], satellite, slot)
            try:
                out[b] = fits.read_l2(path)
            except (OSError, ValueError) as exc:
                raise SystemExit(f"{path}: cannot read a band file the sample uses ({exc})") from None
            self._headers[(satellite, slot, b)] = out[b][1]
        return out

    def headers(self, slot: int, satellite: int, bands=range(len(WAVELENGTHS))) -> dict:
        "`{band index: header}` of the band files of (`satellite`, `slot`) named by `bands`, as the build read them."
        unread = [b for b in bands if (satellite, slot, b) not in self._headers]
        if unread:
            self.read(slot, satellite, unread)
        return {b: self._headers[(satellite, slot, b)] for b in bands}

    def radiance(self, slot: int, satellite: int, geometry_slot: int) -> np.ndarray:
        """True radiance (6, H, W) at `slot` seen with the pointing `satellite` had at `geometry_slot`,
        calibrated as that satellite observes, without noise."""
        geometry = self.instrument.geometry(geometry_slot, satellite, self.drawn)
        truth = self.instrument.radiance(self.model, (slot + 0.5) * SLOT_SECONDS, geometry, (self.drawn,) * 2)
        gain, offset = self.instrument.gain[satellite], self.instrument.offset[satellite]
        return np.minimum(gain[:, None, None] * truth + offset[:, None, None], SATURATION)

    def placed(self, radiance: np.ndarray, headers: dict) -> np.ndarray:
        "Asinh-coded (6, H, W): `radiance` put on the corpus grid as the build puts each band file (0 without one)."
        out = np.zeros((len(WAVELENGTHS), self.resolution, self.resolution), np.float32)
        for b, header in headers.items():
            out[b] = encode(ingest.place(radiance[b], header, self.resolution))
        return out

    def clean_stack(self, sample, registered: bool = False) -> np.ndarray:
        """The sample's stack with every band it holds replaced by its noise-free frame, placed as the build
        placed it; `registered`: every frame drawn with the target's pointing and placed with its headers."""
        stack = np.array(sample.stack, np.float32, copy=True)
        target = (int(sample.satellite), int(sample.when))
        for t, (satellite, slot) in enumerate(sample.frames):
            held = np.flatnonzero(np.asarray(sample.present[t], bool))
            if held.size:
                sat, pointing = (target[0], target[1]) if registered else (int(satellite), int(slot))
                headers = self.headers(pointing, sat, held)
                stack[t] = self.placed(self.radiance(int(slot), sat, pointing), headers)
        return stack


def budget(sample, renderer: Renderer, gap: int, blender: fillers.Filler) -> dict:
    "`{row: per-band dB (6,)}` of one bracketed sample (see the module docstring); `blender` the blend filler."
    blend = blender(sample)
    stored = np.asarray(sample.target, np.float32)
    slot, satellite = int(sample.when), int(sample.satellite)
    files = renderer.read(slot, satellite)
    headers = {b: header for b, (_, header) in files.items()}
    observed = np.stack([encode(ingest.place(data, header, renderer.resolution)) for data, header in files.values()])
    if np.abs(observed - stored).max() > SAME_FRAME_CODED:
        raise SystemExit(f"sample GOES-{satellite} slot {slot}: the archive's files placed on the corpus grid differ "
                         f"from the stored target by {np.abs(observed - stored).max():.2e} (coded); the shards "
                         "were not built from this archive")
    clean = renderer.placed(renderer.radiance(slot, satellite, slot), headers)
    quiet_blend, still_blend = (blender(dataclasses.replace(sample, stack=renderer.clean_stack(sample, registered)))
                                for registered in (False, True))
    oracle = (renderer.placed(renderer.radiance(slot - gap, satellite, slot), headers)
              + renderer.placed(renderer.radiance(slot + gap, satellite, slot), headers)) / 2
    return {"blend": band_psnr(blend, stored), "noise floor": band_psnr(clean, stored),
            "blend vs clean": band_psnr(blend, clean), "clean inputs": band_psnr(quiet_blend, clean),
            "registered inputs": band_psnr(still_blend, clean), "oracle": band_psnr(oracle, stored),
            "oracle vs clean": band_psnr(oracle, clean)}


#: Pointing changes (pixels) of the render-consistency table.
SHIFTS_PX = (0.01, 0.05)


def shift_check(renderer: Renderer, satellite: int, slot: int) -> list:
    "Rows `(dx, changed dB (6,), first-order dB (6,))` of the render-consistency table (module docstring)."
    base = renderer.instrument.geometry(slot, satellite, renderer.drawn)
    shown = lambda g: to_display(renderer.instrument.radiance(renderer.model, (slot + 0.5) * SLOT_SECONDS, g,
                                                           (renderer.drawn,) * 2).astype(np.float64))
    a = shown(base)
    slope = np.gradient(a, axis=-1)
    rows = []
    for dx in SHIFTS_PX:
        b = shown(dataclasses.replace(base, crpix1=base.crpix1 + dx))
        db = lambda mse: 10.0 * np.log10(1.0 / np.maximum(mse, MSE_FLOOR))
        rows.append((dx, db(((a - b) ** 2).mean((-2, -1))), db(((slope * dx) ** 2).mean((-2, -1)))))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default=str(demo.DEFAULT_OUT / "shards"), help="the corpus (the demo's by default)")
    parser.add_argument("--archive", default=str(demo.DEFAULT_OUT / "archive"), help="the synth archive it was built from")
    parser.add_argument("--split", default="test", choices=("train", "val", "test"))
    parser.add_argument("--per-gap", type=int, default=demo.DEMO_SAMPLES, help="bench samples per gap")
    parser.add_argument("--gaps", default=",".join(str(g) for g in demo.DEMO_GAPS))
    args = parser.parse_args(argv)
    gaps = bench.parse_gaps(args.gaps)
    corpus = Corpus.open(args.shards)
    renderer = Renderer(Path(args.archive), corpus.resolution)
    blender = fillers.blend_filler()
    trace = availability.Availability.load(f"{args.shards}/availability.npz")
    table, counts = {row: {} for row in ROWS}, {}
    first = None
    with bench.BenchSet(args.shards, corpus, trace, args.split, bench.BENCH_SEED, None, "bracketed") as samples:
        for gap in gaps:
            scores = {row: [] for row in ROWS}
            for sample in samples.samples(gap, args.per_gap):
                lost = np.asarray(sample.lost, bool)
                first = first or (int(sample.satellite), int(sample.when))
                for row, dbs in budget(sample, renderer, gap, blender).items():
                    scores[row].extend(dbs[lost].tolist())
            counts[gap] = len(scores["blend"])
            for row in ROWS:
                table[row][gap] = float(np.mean(scores[row])) if scores[row] else float("nan")
            print(f"gap {gap}: {counts[gap]} lost (sample, band)s", file=sys.stderr, flush=True)
    print(f"{args.split} split, bracketed bench samples; display PSNR (dB), mean over lost (sample, band)s")
    print("| row | " + " | ".join(f"gap {g}" for g in gaps) + " |")
    print("|---|" + "---:|" * len(gaps))
    for row in ROWS:
        print(f"| {row} | " + " | ".join(f"{table[row][g]:.2f}" for g in gaps) + " |")
    print("| oracle - blend | " + " | ".join(f"{table['oracle'][g] - table['blend'][g]:+.2f}" for g in gaps) + " |")
    print("| noise floor - blend | " + " | ".join(f"{table['noise floor'][g] - table['blend'][g]:+.2f}" for g in gaps) + " |")
    if first is not None:
        print(f"\nRender consistency, GOES-{first[0]} slot {first[1]} at {renderer.drawn} px: display PSNR (dB) of "
              "the change when the pointing moves by dx, changed / first-order shift")
        print("| dx (px) | " + " | ".join(str(b) for b in WAVELENGTHS) + " |")
        print("|---|" + "---:|" * len(WAVELENGTHS))
        for dx, changed, expected in shift_check(renderer, *first):
            print(f"| {dx} | " + " | ".join(f"{c:.1f} / {e:.1f}" for c, e in zip(changed, expected)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
