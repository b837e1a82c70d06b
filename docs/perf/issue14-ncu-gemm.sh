#!/usr/bin/env bash
# Issue 14, item 2: where the f16/bf16 GEMM loses to cuBLAS, by Nsight Compute on the GPU
# machine: the clustered rayo kernel and cuBLAS's (through PyTorch) at bf16 4096³, the first two
# launches of each, tensor-pipe activity, L2 reads, stalls. Run from the repository root there
# with `.devbin-gpu/bins.tgz` (the stripped `rayo`); CSVs into $OUT.
set -u
mkdir -p /tmp/b && tar xzf .devbin-gpu/bins.tgz -C /tmp/b
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
M="sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_active.avg,smsp__average_warp_latency_issue_stalled_barrier,launch__grid_size,launch__registers_per_thread"
timeout 200 $NCU --metrics $M -k regex:wgmma_gemm_bf16 -c 2 --csv /tmp/b/rayo bench --backend cuda --op wgmma_bf16_c2 --op wgmma_bf16 --size 4096 > $OUT/ncu-rayo.csv 2>&1
cat > /tmp/cb.py <<'PY'
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b.T
torch.cuda.synchronize()
PY
timeout 200 $NCU --metrics $M -k regex:"gemm|xmma|sm90" -c 2 --csv python3 /tmp/cb.py > $OUT/ncu-cublas.csv 2>&1
tail -c 3000 $OUT/ncu-rayo.csv | cut -c1-400; tail -c 3000 $OUT/ncu-cublas.csv | cut -c1-400
