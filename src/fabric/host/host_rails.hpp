#pragma once

namespace tide::fabric::host {

// How rail transfers between nodes travel on the host fabric, as on GPUs:
// kPut: one-sided puts with counter writes (the CUDA fabric's copy-engine
// rails); kSendRecv: send/recv (RailMailbox, like NCCL's ncclSend/ncclRecv);
// kRma: one-sided puts with counted signals and credits (RmaRendezvous over
// RmaSignalBoard, like NCCL's host RMA). The last two are two-sided to the
// collectives (Endpoint::railsTwoSided) and run in threads mode only.
enum class HostRails { kPut, kSendRecv, kRma };
const char* hostRailsName(HostRails rails);

}  // namespace tide::fabric::host
