# A plain PyTorch DistributedDataParallel program, as a torchrun user writes one: the env://
# rendezvous (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the launcher), the gloo backend, a
# model initialised differently on every rank (DDP must broadcast rank 0's), and a few SGD steps on
# each rank's own data. It ends by gathering every rank's parameters and printing one line:
#   rank R of W on node N: ddp ok, parameters equal on every rank: True, checksum C
# (tests/launcher/cluster_test.cc runs it over SSH on the namespaced cluster.)
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1000 + rank)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
ddp = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(5):
    generator = torch.Generator().manual_seed(7 * rank + step)
    x = torch.randn(32, 8, generator=generator)
    loss = ddp(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
same = all(torch.equal(g, gathered[0]) for g in gathered)
print(f"rank {rank} of {world} on node {os.environ['NODE_RANK']}: ddp ok, parameters equal on every rank: {same}, "
      f"checksum {flat.double().sum().item():.9f}", flush=True)
dist.destroy_process_group()
