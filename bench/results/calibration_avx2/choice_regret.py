"""Choice regret: time of the algorithm auto picks (its own column) / fastest column, each
algorithm's time the median over runs of the bench. The pick is auto's with the constants in
force for CONVLAB_CACHE_DIR=CACHE_DIR.

    python bench/results/calibration_avx2/choice_regret.py CACHE_DIR run1.txt run2.txt ...
"""
import os, sys, re, statistics, math
cache, files = sys.argv[1], sys.argv[2:]
os.environ["CONVLAB_CACHE_DIR"] = cache
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import convlab
from convlab.problem import shapes
from convlab.dispatch import cost_model
algs = ["direct", "im2col", "winograd2", "winograd4", "winograd6", "auto"]
times = {}
for f in files:
    for line in open(f):
        m = re.match(r"^(\S+)\s+(\d+)\s+([\d.]+) \|(.*?)\|", line)
        if not m or m.group(1) in ("layer",):
            continue
        gflop = float(m.group(3)); cols = m.group(4).split()
        for a, c in zip(algs, cols):
            if c != "-":
                times.setdefault(m.group(1), {}).setdefault(a, []).append(gflop / float(c))
layers = {l.short_name: l for l in shapes.load_suite("resnet_50", mb=1)}
regs, autoregs = [], []
print(cost_model.describe_constants(2)[:90])
for name, by in times.items():
    med = {a: statistics.median(v) for a, v in by.items()}
    l = layers[name]; src, w, _ = l.arrays()
    pick = convlab.select_algorithm(src, w, threads=2, **l.convolve_kwargs())
    fastest = min(v for a, v in med.items() if a != "auto")
    r = med[pick] / fastest; regs.append(r); autoregs.append(med["auto"] / fastest)
    print(f"  {name:16s} pick {pick:10s} choice regret {r:5.2f}  auto/fastest {med['auto']/fastest:5.2f}  fastest {min((v,a) for a,v in med.items() if a!='auto')[1]}")
g = lambda v: math.exp(statistics.fmean(map(math.log, v)))
print(f"choice regret: geo-mean {g(regs):.3f}, worst {max(regs):.2f}; auto column / fastest (medians over {len(files)} runs): geo-mean {g(autoregs):.3f}, worst {max(autoregs):.2f}")
