//===- CommKernels.cpp - collectives and pipeline transfers as kernels ----===//

#include "runtime/comm/CommKernels.h"

#include <algorithm>
#include <cstring>
#include <deque>

namespace cleave::runtime {

namespace {

/// Part `part` of a dim seen as [outer][blocks][parts][part * inner]: `runs`
/// contiguous runs of `runBytes`, run i at i * parts * runBytes (plus the
/// part's offset) in the whole and at i * runBytes in the part.
struct PartRuns {
  size_t runs, runBytes;
};

PartRuns partRuns(const Shape &shape, int64_t dim, int64_t blocks, int64_t parts,
                  size_t elementBytes) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  return {static_cast<size_t>(outer * blocks),
          static_cast<size_t>(shape[dim] / (blocks * parts) * inner) * elementBytes};
}

/// The rearrangements on a backend's memory: one strided copy each.
Status extractPartOn(Backend &backend, const void *whole, const Shape &shape, int64_t dim,
                     int64_t blocks, int64_t parts, int64_t part, size_t elementBytes, void *out) {
  PartRuns r = partRuns(shape, dim, blocks, parts, elementBytes);
  return backend.copyRows(out, r.runBytes, static_cast<const char *>(whole) + part * r.runBytes,
                          parts * r.runBytes, r.runBytes, r.runs);
}

Status insertPartOn(Backend &backend, const void *in, const Shape &shape, int64_t dim,
                    int64_t blocks, int64_t parts, int64_t part, size_t elementBytes, void *whole) {
  PartRuns r = partRuns(shape, dim, blocks, parts, elementBytes);
  return backend.copyRows(static_cast<char *>(whole) + part * r.runBytes, parts * r.runBytes, in,
                          r.runBytes, r.runBytes, r.runs);
}

} // namespace

void extractPart(const void *whole, const Shape &shape, int64_t dim, int64_t blocks, int64_t parts,
                 int64_t part, size_t elementBytes, void *out) {
  PartRuns r = partRuns(shape, dim, blocks, parts, elementBytes);
  for (size_t i = 0; i < r.runs; ++i)
    std::memcpy(static_cast<char *>(out) + i * r.runBytes,
                static_cast<const char *>(whole) + (i * parts + part) * r.runBytes, r.runBytes);
}

void insertPart(const void *in, const Shape &shape, int64_t dim, int64_t blocks, int64_t parts,
                int64_t part, size_t elementBytes, void *whole) {
  PartRuns r = partRuns(shape, dim, blocks, parts, elementBytes);
  for (size_t i = 0; i < r.runs; ++i)
    std::memcpy(static_cast<char *>(whole) + (i * parts + part) * r.runBytes,
                static_cast<const char *>(in) + i * r.runBytes, r.runBytes);
}


/// What the comm kernels share: the rank's place and groups, and the
/// buffers they keep in the compute backend's memory.
struct CommBackend::State {
  Backend &compute;
  const Plan &plan;
  int64_t rank;
  RankComms comms;
  /// One staging buffer per send instruction, with its transfer.
  struct Staged {
    char *data = nullptr;
    Request request;
  };
  std::deque<Staged> sends; // a deque: kernels hold pointers into it
  std::vector<void *> buffers;
  size_t heldBytes = 0;

  State(Backend &compute, const Plan &plan, int64_t rank, RankComms comms)
      : compute(compute), plan(plan), rank(rank), comms(comms) {}
  ~State() {
    for (void *p : buffers)
      compute.deallocate(p);
  }

  Status newBuffer(size_t bytes, char **out) {
    void *p = nullptr;
    CLEAVE_RETURN_IF_ERROR(compute.allocate(bytes, &p));
    buffers.push_back(p);
    heldBytes += bytes;
    *out = static_cast<char *>(p);
    return {};
  }
};

CommBackend::CommBackend(Backend &compute, const Plan &plan, int64_t rank, RankComms comms)
    : compute_(compute), state_(std::make_unique<State>(compute, plan, rank, comms)) {}

CommBackend::~CommBackend() {
  (void)finishSends();
  (void)compute_.synchronize();
}

namespace {
/// The kernels this backend adds to the compute backend's.
bool ownsKernel(std::string_view kernel) { return isCommKernel(kernel) || isGroupKernel(kernel); }
} // namespace

bool CommBackend::hasKernel(std::string_view kernel) const {
  return ownsKernel(kernel) || compute_.hasKernel(kernel);
}

std::vector<std::string> CommBackend::kernelNames() const {
  std::vector<std::string> names = compute_.kernelNames();
  for (std::string_view k : kCommKernels)
    names.emplace_back(k);
  names.emplace_back("shard");
  std::sort(names.begin(), names.end());
  return names;
}

size_t CommBackend::heldBytes() const { return state_->heldBytes; }

Status CommBackend::finishSends() {
  Status first;
  for (State::Staged &s : state_->sends) {
    Status st = s.request.wait();
    if (first.ok() && !st.ok())
      first = st;
  }
  return first;
}

Status CommBackend::prepareKernel(const KernelSignature &sig, KernelFn *fn) {
  if (!ownsKernel(sig.kernel))
    return compute_.prepareKernel(sig, fn);
  State &st = *state_;
  const DeviceSpec &me = st.plan.devices[st.rank];

  if (sig.kernel == "send" || sig.kernel == "recv") {
    int64_t peerStage = 0, tag = 0;
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("peer_stage", &peerStage));
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("tag", &tag));
    // The same tp and dp index on the peer stage (rank = (stage*dp + dp)*tp +
    // tp).
    int peer = static_cast<int>((peerStage * st.plan.dp + me.dp) * st.plan.tp + me.tp);
    Communicator *world = st.comms.world;
    if (sig.kernel == "recv") {
      const TensorDesc out = sig.outputs.at(0);
      *fn = [world, out, peer, tag](const KernelCall &call) -> Status {
        return world->recv(call.outputs[0], out.numel(), out.dtype, peer, static_cast<int>(tag));
      };
      return {};
    }
    const TensorDesc in = *sig.inputs.at(0);
    st.sends.emplace_back();
    State::Staged *staged = &st.sends.back();
    CLEAVE_RETURN_IF_ERROR(st.newBuffer(in.bytes(), &staged->data));
    Backend *compute = &compute_;
    *fn = [world, compute, in, peer, tag, staged](const KernelCall &call) -> Status {
      // The previous microbatch's transfer must be out of the staging buffer.
      CLEAVE_RETURN_IF_ERROR(staged->request.wait());
      CLEAVE_RETURN_IF_ERROR(compute->copyOnDevice(staged->data, call.inputs[0], in.bytes()));
      return world->isend(staged->data, in.numel(), in.dtype, peer, static_cast<int>(tag),
                          &staged->request);
    };
    return {};
  }

  std::string groupName;
  CLEAVE_RETURN_IF_ERROR(sig.attrs.getString("group", &groupName));
  Communicator *group = groupName == "tp" ? st.comms.tp : st.comms.dp;
  if (!group)
    return CLEAVE_ERROR(sig.kernel, ": no ", groupName, " group on rank ", st.rank);
  const TensorDesc in = *sig.inputs.at(0), out = sig.outputs.at(0);
  const int64_t n = group->size();
  const size_t esz = dtypeBytes(in.dtype);
  if (in.dtype != out.dtype)
    return CLEAVE_ERROR(sig.kernel, ": ", describe(in.shape, in.dtype), " in, ",
                        describe(out.shape, out.dtype), " out: the dtype changes");

  if (sig.kernel == "all_reduce") {
    if (!canReduce(ReduceOp::Sum, in.dtype))
      return CLEAVE_ERROR(sig.kernel, ": cannot sum ", dtypeName(in.dtype));
    *fn = [group, in](const KernelCall &call) -> Status {
      return group->allReduce(call.inputs[0], call.outputs[0], in.numel(), in.dtype, ReduceOp::Sum);
    };
    return {};
  }

  if (sig.kernel == "shard") {
    // This rank's part, by its index in the group: a local copy.
    int64_t dim = 0, blocks = 1;
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("dim", &dim));
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("blocks", &blocks, 1));
    if (dim < 0 || dim >= in.rank() || in.shape[dim] % (n * blocks) != 0)
      return CLEAVE_ERROR(sig.kernel, ": dim ", dim, " of ", describe(in.shape, in.dtype),
                          " does not split into ", n, " parts of ", blocks, " block(s)");
    Shape shape = in.shape;
    const int64_t index = group->rank();
    Backend *compute = &compute_;
    *fn = [compute, shape, dim, blocks, n, index, esz](const KernelCall &call) -> Status {
      return extractPartOn(*compute, call.inputs[0], shape, dim, blocks, n, index, esz,
                           call.outputs[0]);
    };
    return {};
  }

  if (sig.kernel == "all_gather" || sig.kernel == "reduce_scatter") {
    int64_t dim = 0, blocks = 1;
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("dim", &dim));
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("blocks", &blocks, 1));
    bool gather = sig.kernel == "all_gather";
    const TensorDesc &whole = gather ? out : in, &part = gather ? in : out;
    // Rank r's part is part r of every block of the whole; the
    // communicator's buffers are rank-major, so blocked or inner-dim layouts
    // go through a rank-major buffer.
    bool rankMajor = blocks == 1 && std::all_of(whole.shape.begin(), whole.shape.begin() + dim,
                                                [](int64_t d) { return d == 1; });
    char *buffer = nullptr;
    if (!rankMajor)
      CLEAVE_RETURN_IF_ERROR(st.newBuffer(whole.bytes(), &buffer));
    Shape shape = whole.shape;
    Backend *compute = &compute_;
    if (gather) {
      *fn = [group, compute, part, shape, dim, blocks, n, esz,
             buffer](const KernelCall &call) -> Status {
        if (!buffer)
          return group->allGather(call.inputs[0], call.outputs[0], part.numel(), part.dtype);
        CLEAVE_RETURN_IF_ERROR(group->allGather(call.inputs[0], buffer, part.numel(), part.dtype));
        for (int64_t r = 0; r < n; ++r)
          CLEAVE_RETURN_IF_ERROR(insertPartOn(*compute, buffer + r * part.bytes(), shape, dim,
                                              blocks, n, r, esz, call.outputs[0]));
        return {};
      };
    } else {
      if (!canReduce(ReduceOp::Sum, in.dtype))
        return CLEAVE_ERROR(sig.kernel, ": cannot sum ", dtypeName(in.dtype));
      *fn = [group, compute, part, shape, dim, blocks, n, esz,
             buffer](const KernelCall &call) -> Status {
        const void *source = call.inputs[0];
        if (buffer) {
          for (int64_t r = 0; r < n; ++r)
            CLEAVE_RETURN_IF_ERROR(extractPartOn(*compute, call.inputs[0], shape, dim, blocks, n, r,
                                                 esz, buffer + r * part.bytes()));
          source = buffer;
        }
        return group->reduceScatter(source, call.outputs[0], part.numel(), part.dtype,
                                    ReduceOp::Sum);
      };
    }
    return {};
  }

  // all_to_all: this rank holds part `rank` of from_dim and all of to_dim;
  // peer q gets part q of to_dim, and what comes back from q is part q of
  // from_dim.
  int64_t fromDim = 0, toDim = 0, fromBlocks = 1, toBlocks = 1;
  CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("from_dim", &fromDim));
  CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("to_dim", &toDim));
  CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("from_blocks", &fromBlocks, 1));
  CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("to_blocks", &toBlocks, 1));
  Shape inShape = in.shape, outShape = out.shape;
  Shape pieceShape = outShape; // what one peer sends: to_dim divided, from_dim not grown
  pieceShape[fromDim] = inShape[fromDim];
  const size_t pieceBytes = static_cast<size_t>(numElements(pieceShape)) * esz;
  char *packed = nullptr, *received = nullptr;
  CLEAVE_RETURN_IF_ERROR(st.newBuffer(in.bytes(), &packed));
  CLEAVE_RETURN_IF_ERROR(st.newBuffer(out.bytes(), &received));
  Backend *compute = &compute_;
  *fn = [=](const KernelCall &call) -> Status {
    for (int64_t q = 0; q < n; ++q)
      CLEAVE_RETURN_IF_ERROR(extractPartOn(*compute, call.inputs[0], inShape, toDim, toBlocks, n, q,
                                           esz, packed + q * pieceBytes));
    CLEAVE_RETURN_IF_ERROR(
        group->allToAll(packed, received, static_cast<size_t>(numElements(pieceShape)), in.dtype));
    for (int64_t q = 0; q < n; ++q)
      CLEAVE_RETURN_IF_ERROR(insertPartOn(*compute, received + q * pieceBytes, outShape, fromDim,
                                          fromBlocks, n, q, esz, call.outputs[0]));
    return {};
  };
  return {};
}

} // namespace cleave::runtime
