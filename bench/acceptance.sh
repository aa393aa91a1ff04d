#!/usr/bin/env bash
# Every acceptance table of the issues, in one quiet run (nothing else should be running).
# Results: bench/results/<name>.txt (the printed table) and .csv (one row per contender).
#   bash bench/acceptance.sh            # about 20 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
all=direct,im2col,winograd2,winograd4,winograd6,auto,plan
bench() {  # name, then bench arguments
    local name=$1; shift
    # a failed check (bench exits 1, a WRONG line says where) must not stop the other tables
    python -m convlab bench --threads 2 "$@" --csv "$out/$name.csv" | tee "$out/$name.txt" \
        || echo "bench $name: a result check failed, see the WRONG lines above"
}
bench resnet_50     --suite resnet_50    --mb 1 --repeats 15 --algorithms $all --gemm
bench mobilenet_dw  --suite mobilenet_dw --mb 1 --repeats 41 --algorithms direct,im2col,auto,plan
bench vgg_19        --suite vgg_19       --mb 1 --repeats 7  --algorithms $all
bench googlenet_v2  --suite googlenet_v2 --mb 1 --repeats 9  --algorithms $all
bench 1d            --suite 1d           --mb 1 --repeats 15 --algorithms $all
bench dilated       --suite dilated      --mb 1 --repeats 15 --algorithms direct,im2col,auto
bench 3d_unet       --suite 3d_unet      --mb 1 --repeats 3  --algorithms $all
bench resnet_50_mb8 --suite resnet_50    --mb 8 --repeats 5  --algorithms $all
bench large_kernel  --suite large_kernel --mb 1 --repeats 5  --algorithms direct,im2col,fft,auto,plan
python bench/peak_memory.py --suite vgg_19 --layers conv1_2 --algorithms im2col,direct,winograd4 \
    | tee "$out/peak_memory_vgg_19.txt"
python bench/peak_memory.py --suite 3d_unet --algorithms im2col,direct,winograd2 \
    | tee "$out/peak_memory_3d_unet.txt"
python bench/overhead.py | tee "$out/overhead.txt"
