"""The learned filler the package ships: it loads under the current net (else: suvi-fill pretrain), stays small,
and its training record and bench belong to it."""
import hashlib

from suvi_fill.model import shipped


def test_the_shipped_filler_loads_under_the_current_net():
    seen = shipped.check_shipped()            # raises, naming the file and the mismatch, when it no longer fits
    assert seen["bytes"] <= shipped.SHIPPED_LIMIT_BYTES
    assert seen["resolution"] == 64 and seen["ladder"]


def test_its_record_and_bench_belong_to_it():
    path = shipped.shipped_checkpoint()
    record = shipped.shipped_record()
    training, bench = record["training"], record["bench"]
    assert training["checkpoint_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    curve = training["validation"]
    assert len(curve) >= 2 and curve[0][0] == 0 and training["best_psnr"] >= training["untrained_psnr"]
    assert training["net"] == shipped.check_shipped()["net"]
    assert training["corpus"]["resolution"] == 64 and training["command"].startswith("suvi-fill pretrain")
    assert bench["gaps"] and "learned" in bench["fillers"] and bench["checkpoint_sha256"]


def test_it_was_trained_as_suvi_fill_pretrain_trains_now():
    "A changed pretrain setting (the partial-loss share, the steps) means the shipped filler must be made again."
    from suvi_fill import pretrain
    settings = shipped.shipped_record()["training"]["settings"]
    assert settings.get("partial_share") == pretrain.PRETRAIN_PARTIAL_SHARE
    assert settings["max_steps"] == pretrain.PRETRAIN_STEPS
    assert {k: settings[k] for k in pretrain.PRETRAIN_TRAIN if k != "device"} == \
        {k: v for k, v in pretrain.PRETRAIN_TRAIN.items() if k != "device"}
