import sys,time,faulthandler,multiprocessing as mp
sys.path[:0]=["python"]
def R(r,ids,out):
    from tide.bench.topologies import as_own_host
    as_own_host(f"h{r}")
    import torch
    from tide.comm import Communicator,unique_id
    if r==0: u=unique_id(); ids.put(u)
    else: u=ids.get(timeout=60)
    c=Communicator(nodes=2,gpus_per_node=1,rank=r,arena_bytes=1<<24,fabric="cuda",unique_id=u,device=0,timeout_s=2)
    a=c.register_group([[64,8]]); o,_=c.alloc(a.plan["group"]["unsharded_bytes"])
    s=torch.zeros(a.plan["group"]["shard_bytes"],dtype=torch.uint8,device="cuda")
    st=torch.cuda.current_stream().cuda_stream
    c.all_gather(a,s.data_ptr(),o,st); torch.cuda.synchronize(); out.put((r,"AG1 ok"))
    if r==1: time.sleep(45); out.put((1,"slept 45 s, exits")); return
    c.register_group([[16,4]])  # rank 0 registers late; rank 1 never does
    t=time.monotonic()
    faulthandler.dump_traceback_later(35,exit=True)
    try: c.all_gather(a,s.data_ptr(),o,st); out.put((0,f"AG2 returned {time.monotonic()-t:.1f}s"))
    except Exception as e: out.put((0,f"AG2 raised after {time.monotonic()-t:.1f}s: {e}"[:400]))
if __name__=="__main__":
    x=mp.get_context("spawn"); i,q=x.Queue(),x.Queue()
    P=[x.Process(target=R,args=(r,i,q)) for r in (0,1)]; t=time.monotonic()
    [p.start() for p in P]; [p.join(80) for p in P]
    print("exit codes",[p.exitcode for p in P],"after %.0f s"%(time.monotonic()-t))
    while not q.empty(): print(q.get())
