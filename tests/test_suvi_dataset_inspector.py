"""suvi_fill.inspector: the plotting functions, headless (Agg), checked for content on a built corpus."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from suvi_fill import dataset, inspector, ingest, metrics, paths
from test_suvi_ingest import DAY, write_archive


def test_plots_show_the_frame_presence_and_mapping(tmp_path):
    d0 = paths.first_slot_of_day(DAY)
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
    plt.close("all")
