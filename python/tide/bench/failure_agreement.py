"""What a benchmark rank does after one of its configurations raised.

A driver that goes on to its next configuration after a failure keeps the other configurations'
results, but only when every rank failed the same configuration: a rank that failed alone (an
out-of-memory on one of two ranks sharing a GPU, for one) would start the next configuration while
the others still wait in the failed one's collectives, and the job would hang until an outer
timeout killed it with nothing said. So a failed rank first asks the others, on a gloo group of its
own (the main group may be in the middle of a collective), whether they failed too; if they all
answer within a deadline the driver goes on, otherwise this process ends at once with a message,
and the launcher (torchrun) stops the ranks still waiting."""

from __future__ import annotations

import datetime
import os
import sys

import torch.distributed as dist

# Ranks failing the same configuration fail in the same step's code, seconds apart at most; a rank
# that has not failed within this long is waiting in a collective and never will.
AGREEMENT_TIMEOUT_S = 30.0


class FailureAgreement:
    """Made on every rank at once (new_group is collective), before the first configuration."""

    def __init__(self) -> None:
        self.rank = dist.get_rank()
        # A group apart from the main one, so that its messages cannot be taken for a collective
        # that a healthy rank is blocked in there; its own timeout is the agreement's deadline
        # (read here, at construction). A plain barrier, not monitored_barrier: that one applies
        # its timeout on rank 0 only, the other ranks wait for rank 0 with the group's timeout.
        self.timeout_s = AGREEMENT_TIMEOUT_S
        self.group = (dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=self.timeout_s))
                      if dist.get_world_size() > 1 else None)

    def all_failed_or_exit(self, what: str, before_exit=None) -> None:
        """Returns when every rank failed `what` (the driver may go on to its next configuration);
        otherwise calls before_exit (e.g. to save what finished) and ends this process with status 1."""
        if self.group is None:
            return
        try:
            dist.barrier(group=self.group)
            return
        except Exception as e:  # noqa: BLE001 - any answer but "all here" means the others are stuck
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"[rank {self.rank}] {what} failed here but not on every rank within {self.timeout_s:.0f} s "
              f"({reason}): the others wait in its collectives, so this process ends (status 1) and the "
              "launcher stops the job", file=sys.stderr, flush=True)
        if before_exit is not None:
            before_exit()
        sys.stdout.flush()
        sys.stderr.flush()
        # Not SystemExit: destroying the process group, or interpreter shutdown, could block on the
        # collectives the other ranks are stuck in.
        os._exit(1)
