"""suvi_fill.widgets.corpus_inspector: the plotting functions, headless (Agg), checked for content on a built corpus."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from suvi_fill.physics import coding as metrics
from suvi_fill.corpus import shards as dataset
from suvi_fill.widgets import corpus_inspector as inspector
from suvi_fill.archive import ingest
from suvi_fill.physics import timebase
from test_suvi_ingest import DAY, write_archive


def test_plots_show_the_frame_presence_and_mapping(tmp_path):
    d0 = timebase.first_slot_of_day(DAY)
    write_archive(tmp_path / "src", range(d0 + 10, d0 + 14), n=32, skip={(16, d0 + 12, 195)})
    ingest.build(tmp_path / "src", tmp_path / "out", progress=False, span_min=1)
    shard = dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, 16))
    figure, (a, b, c) = plt.subplots(1, 3)
    image = inspector.plot_frame(a, shard, 11, 195).get_array()
    assert np.allclose(image, metrics.to_display(dataset.decode(shard.band(11, 3)), 195))
    rows, cols = np.mgrid[:32, :32]
    bright = image > 0.9 * image.max()                      # the spot sits due north: upper half, centred
    assert (rows[bright].mean() > 20) and abs(cols[bright].mean() - 15.5) < 1.5
    assert not inspector.plot_frame(a, shard, 12, 195).get_array().any()       # the missing band is black
    rgb = inspector.plot_frame(a, shard, 11, (304, 171, 195)).get_array()
    assert rgb.shape == (32, 32, 3) and np.allclose(rgb[..., 2], image)
    strip = inspector.plot_presence(b, shard, 12).get_array()
    assert strip[3, 12] == dataset.MISSING and strip[3, 11] == dataset.CLEAN and strip[0, 0] == dataset.MISSING
    counts, edges = inspector.plot_histogram(c, shard, 11, 195, {195: (0.5, 2.0, 1.0)})
    assert counts.sum() == 32 * 32 and [line.get_xdata()[0] for line in c.lines] == [0.5, 2.5]
    plt.close(figure)
    box = inspector.inspector(tmp_path / "out")
    assert box.controls["gamma"].value == metrics.DISPLAY_MAPPING[171][2]
    box.controls["band"].value = (195,)
    assert box.controls["vmax"].value == metrics.DISPLAY_MAPPING[195][1]
    box.controls["band"].value = (304, 171, 195)          # an RGB: the sliders act on the chosen channel only
    assert [label for label, _ in box.controls["channel"].options] == ["R 304 Å", "G 171 Å", "B 195 Å"]
    box.controls["channel"].value = 195
    before = box.panel.image.value
    box.controls["vmax"].value = 1.0
    bench = {w: metrics.DISPLAY_MAPPING[w] for w in (304, 171, 195)}
    assert box.mapping() == {**bench, 195: (bench[195][0], 1.0, bench[195][2])}
    assert box.panel.image.value != before and box.panel.caption.value.endswith("· vmin/vmax/gamma of B 195 Å")
    rgb = inspector.frame_display(shard, 11, (304, 171, 195), box.mapping())
    assert np.allclose(rgb[..., 2], inspector.mapped(dataset.decode(shard.band(11, 3)), bench[195][0], 1.0, bench[195][2]))
    assert np.allclose(rgb[..., 1], metrics.to_display(dataset.decode(shard.band(11, 2)), 171))
    box.controls["channel"].value = 304                    # red's own mapping comes back onto the sliders
    assert (box.controls["vmax"].value, box.controls["gamma"].value) == bench[304][1:]
    plt.close("all")
