"""The bench harness's schedules (convlab.benchmark): what they time, not how fast."""
from convlab import benchmark
from convlab.shapes.descriptor import parse_descriptor


def test_time_rotation_times_every_call_once_per_round_in_varying_order():
    order = []
    calls = [lambda name=name: order.append(name) for name in "abc"]
    times = benchmark.time_rotation(calls, repeats=12, pause=0)
    assert [len(t) for t in times] == [12, 12, 12]
    assert all(s >= 0 for t in times for s in t)
    untimed, turns = order[:3], order[3:]
    assert untimed == list("abc")
    # every timed call right after an untimed one of itself
    assert all(turns[i] == turns[i + 1] for i in range(0, 72, 2))
    timed = turns[1::2]
    rounds = [tuple(timed[i:i + 3]) for i in range(0, 36, 3)]
    assert all(sorted(r) == list("abc") for r in rounds)
    # no call always follows the same other one
    assert len(set(rounds)) > 2


def test_time_rotation_takes_more_rounds_to_fill_min_seconds():
    times = benchmark.time_rotation([lambda: None], repeats=1, pause=0, min_seconds=1e-3)
    assert len(times[0]) > 1


def test_mixed_schedule_times_convlab_contenders_together_and_checks_them():
    layer = parse_descriptor('mb1ic4ih6oc8oh6kh3ph1n"tiny"')
    contenders = benchmark.bench_layer(layer, ["direct", "im2col", "auto", "plan"], threads=1,
                                       repeats=4, warmup=1, torch=None, onnx=None, ort=None,
                                       seed=0, schedule="mixed", rounds=2)
    assert [c.label for c in contenders] == ["direct", "im2col", "auto", "plan"]
    for contender in contenders:
        # two rounds of two rotations each
        assert len(contender.times) == 4, contender.label
        assert contender.ok and contender.error is not None, contender.label


def test_gemm_share_summary_judges_gemm_bound_layers_apart():
    shares = [(0.95, "big", True), (0.72, "medium", True), (0.40, "tiny", False)]
    text = benchmark.gemm_share_summary(shares)
    overall, bound = text.split("; ")
    assert "lowest 40% (tiny), below 70% on 1 of 3 layers" in overall
    assert "lowest 72% (medium), below 70% on 0 of 2" in bound
    assert "GEMM-bound" not in benchmark.gemm_share_summary([(0.4, "tiny", False)])
