#include "runtime/PlanVerify.h"
#include "runtime/Checked.h"
#include "runtime/JsonFile.h"
#include "runtime/Kernel.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <set>
#include <tuple>

namespace cleave::runtime {
namespace {

std::string shapeOf(const TensorDesc &desc) { return describe(desc.shape, desc.dtype); }

std::string rankList(const std::vector<int64_t> &ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

/// "instruction 7 (recv at model.py:40 (in blocks.2))".
std::string instructionLabel(size_t index, const InstructionSpec &inst) {
  return "instruction " + std::to_string(index) + " (" + inst.kernel +
         (inst.loc.empty() ? "" : " at " + inst.loc) + ")";
}

/// "forward chunk 1 microbatch 0"; without a microbatch for what holds for
/// all of them.
std::string slotLabel(const std::string &phase, int64_t chunk,
                      std::optional<int64_t> microbatch = std::nullopt) {
  return phase + " chunk " + std::to_string(chunk) +
         (microbatch ? " microbatch " + std::to_string(*microbatch) : "");
}

/// Attributes other than `group`, for saying how two collectives differ:
/// "{blocks = 1, dim = 2}".
std::string attrsLabel(const Attributes &attrs) {
  std::string text;
  for (const auto &[name, value] : attrs.all()) {
    if (name == "group")
      continue;
    std::string v;
    if (auto *i = std::get_if<int64_t>(&value))
      v = std::to_string(*i);
    else if (auto *s = std::get_if<std::string>(&value))
      v = "\"" + *s + "\"";
    else if (auto *b = std::get_if<bool>(&value))
      v = *b ? "true" : "false";
    else if (auto *d = std::get_if<double>(&value))
      v = std::to_string(*d);
    else if (auto *l = std::get_if<std::vector<int64_t>>(&value))
      v = rankList(*l);
    text += (text.empty() ? "" : ", ") + name + " = " + v;
  }
  return "{" + text + "}";
}

struct Reporter {
  std::vector<std::string> &errors;
  size_t max;
  bool full() const { return errors.size() >= max; }
  void add(std::string message) {
    if (!full())
      errors.push_back(std::move(message));
  }
};

//===--------------------------------------------------------------------===//
// Shapes of layout changes.
//===--------------------------------------------------------------------===//

/// The output shape `inst` must have for input `in` over a group of `n`
/// ranks, or an error about its attributes. `how` says what it does, for
/// the message.
Status expectedCollectiveShape(const InstructionSpec &inst, const TensorDesc &in, int64_t n,
                               Shape *out, std::string *how) {
  *out = in.shape;
  auto checkDim = [&](const char *name, int64_t *dim) -> Status {
    CLEAVE_RETURN_IF_ERROR(inst.attrs.getInt(name, dim));
    if (*dim < 0 || *dim >= in.rank())
      return CLEAVE_ERROR(name, " ", *dim, " is not a dim of its ", shapeOf(in), " input");
    return {};
  };
  auto checkBlocks = [&](const char *name, int64_t size, int64_t *blocks) -> Status {
    CLEAVE_RETURN_IF_ERROR(inst.attrs.getInt(name, blocks, 1));
    if (*blocks < 1 || size % *blocks != 0)
      return CLEAVE_ERROR(name, " ", *blocks, " does not divide dim size ", size);
    return {};
  };
  if (inst.kernel == "all_reduce") {
    *how = "summed";
    return {};
  }
  if (inst.kernel == "all_gather" || inst.kernel == "reduce_scatter" || inst.kernel == "shard") {
    int64_t dim = 0, blocks = 1;
    CLEAVE_RETURN_IF_ERROR(checkDim("dim", &dim));
    bool gather = inst.kernel == "all_gather";
    if (!gather && in.shape[dim] % n != 0)
      return CLEAVE_ERROR("dim ", dim, " of its ", shapeOf(in), " input does not split ", n,
                          " ways");
    (*out)[dim] = gather ? in.shape[dim] * n : in.shape[dim] / n;
    CLEAVE_RETURN_IF_ERROR(checkBlocks("blocks", (*out)[dim], &blocks));
    *how = std::string(gather                       ? "gathered"
                       : inst.kernel == "shard" ? "cut to this rank's part"
                                                : "scattered") +
           " along dim " + std::to_string(dim);
    return {};
  }
  // all_to_all: the split moves from from_dim (which grows) to to_dim.
  int64_t from = 0, to = 0, fromBlocks = 1, toBlocks = 1;
  CLEAVE_RETURN_IF_ERROR(checkDim("from_dim", &from));
  CLEAVE_RETURN_IF_ERROR(checkDim("to_dim", &to));
  if (from == to)
    return CLEAVE_ERROR("from_dim and to_dim are both ", from);
  if (in.shape[to] % n != 0)
    return CLEAVE_ERROR("to_dim ", to, " of its ", shapeOf(in), " input does not split ", n,
                        " ways");
  (*out)[from] = in.shape[from] * n;
  (*out)[to] = in.shape[to] / n;
  CLEAVE_RETURN_IF_ERROR(checkBlocks("from_blocks", (*out)[from], &fromBlocks));
  CLEAVE_RETURN_IF_ERROR(checkBlocks("to_blocks", in.shape[to], &toBlocks));
  *how = "traded from dim " + std::to_string(to) + " to dim " + std::to_string(from);
  return {};
}

//===--------------------------------------------------------------------===//
// The simulation.
//===--------------------------------------------------------------------===//

/// Who sends a transfer and who receives it: (sender stage, receiver stage,
/// dp index, tp index, microbatch, tag).
using TransferKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

class Simulation {
public:
  Simulation(const Plan &plan, Reporter &report, VerifyResult &result)
      : plan(plan), report(report), result(result) {}

  void run();

private:
  /// Where a rank is: slot `slot` of its stage's schedule, instruction
  /// `inst` of that slot's phase.
  struct RankState {
    const DeviceSpec *device = nullptr;
    const ProgramSpec *program = nullptr;
    const std::vector<ScheduleSlot> *slots = nullptr;
    size_t slot = 0, inst = 0;
    bool finished = false;
    bool blocked = false; // at a recv whose send has not come, or a collective
  };
  struct SentMessage {
    int64_t rank;
    std::string phase;
    int64_t chunk, microbatch, peerChunk;
    size_t inst;
    TensorDesc desc;
    std::string where; // the sender's "rank R (P), SLOT, instruction I (K)"
  };

  const ScheduleSlot &slotOf(const RankState &s) const { return (*s.slots)[s.slot]; }
  const Phase *phaseOf(const RankState &s) const {
    const ScheduleSlot &slot = slotOf(s);
    return s.program->findPhase(slot.phase, slot.chunk, slot.microbatch);
  }
  const InstructionSpec &instOf(const RankState &s) const {
    return phaseOf(s)->instructions[s.inst];
  }
  std::string where(const RankState &s) const {
    const ScheduleSlot &slot = slotOf(s);
    return "rank " + std::to_string(s.device->rank) + " (" + s.program->name + "), " +
           slotLabel(slot.phase, slot.chunk, slot.microbatch) + ", " +
           instructionLabel(s.inst, instOf(s));
  }
  /// What keeps rank `r` from taking part in something: "finished its
  /// schedule" or "is at forward chunk 0 microbatch 1, instruction 3 (recv)".
  std::string stateOf(int64_t r) const {
    const RankState &s = states[r];
    if (s.finished)
      return "finished its schedule";
    const ScheduleSlot &slot = slotOf(s);
    return "is at " + slotLabel(slot.phase, slot.chunk, slot.microbatch) + ", " +
           instructionLabel(s.inst, instOf(s));
  }
  TensorDesc inputOf(const RankState &s) const {
    return s.program->buffers[*instOf(s).inputs[0]].desc;
  }
  int64_t attr(const InstructionSpec &inst, const char *name) const {
    int64_t v = 0;
    (void)inst.attrs.getInt(name, &v); // present: loadPlan or checkStructure checked
    return v;
  }
  std::string groupKind(const InstructionSpec &inst) const {
    std::string g;
    (void)inst.attrs.getString("group", &g);
    return g;
  }

  bool advance(RankState &s);
  bool send(RankState &s);
  bool receive(RankState &s);
  bool completeCollectives();
  void reportDeadlock();
  std::string whyNoSend(const RankState &s) const;
  std::string whyGroupWaits(const RankState &s) const;

  const Plan &plan;
  Reporter &report;
  VerifyResult &result;
  std::vector<RankState> states;
  std::map<TransferKey, SentMessage> inFlight;
  std::set<TransferKey> delivered;
  bool failed = false;
};

void Simulation::run() {
  for (const DeviceSpec &device : plan.devices) {
    RankState s;
    s.device = &device;
    s.program = plan.programForRank(device.rank);
    s.slots = &plan.stageSlots[device.stage];
    states.push_back(s);
  }
  // Rounds: every rank runs until it blocks, then the collectives whose
  // whole group arrived complete. No progress with ranks unfinished is a
  // deadlock; each round completes at least one instruction, so this ends.
  while (!failed) {
    bool progress = false;
    for (RankState &s : states)
      progress |= advance(s);
    if (failed)
      return;
    progress |= completeCollectives();
    if (failed)
      return;
    bool done =
        std::all_of(states.begin(), states.end(), [](const RankState &s) { return s.finished; });
    if (done)
      break;
    if (!progress)
      return reportDeadlock();
  }
  for (const auto &[key, message] : inFlight)
    report.add(message.where + ": tag " + std::to_string(std::get<5>(key)) + " to stage " +
               std::to_string(std::get<1>(key)) + " is never received");
}

/// Runs `s` until it finishes or blocks; true if it completed anything.
bool Simulation::advance(RankState &s) {
  bool progress = false;
  while (!s.finished && !failed) {
    if (s.slot >= s.slots->size()) {
      s.finished = true;
      return true;
    }
    const Phase *phase = phaseOf(s);
    if (s.inst >= phase->instructions.size()) {
      ++s.slot;
      s.inst = 0;
      progress = true;
      continue;
    }
    const InstructionSpec &inst = phase->instructions[s.inst];
    if (inst.kernel == "send") {
      if (!send(s))
        return progress;
    } else if (inst.kernel == "recv") {
      if (!receive(s)) {
        s.blocked = true;
        return progress;
      }
    } else if (isCollective(inst.kernel)) {
      s.blocked = true; // completeCollectives moves the whole group on
      return progress;
    }
    s.blocked = false;
    ++s.inst;
    progress = true;
  }
  return progress;
}

/// Buffers the send: it never waits for its receiver.
bool Simulation::send(RankState &s) {
  const InstructionSpec &inst = instOf(s);
  const ScheduleSlot &slot = slotOf(s);
  int64_t tag = attr(inst, "tag");
  TransferKey key{s.device->stage, attr(inst, "peer_stage"), s.device->dp,
                  s.device->tp,    slot.microbatch,          tag};
  auto previous = inFlight.find(key);
  if (previous != inFlight.end() || delivered.count(key)) {
    report.add(where(s) + ": sends tag " + std::to_string(tag) + " of microbatch " +
               std::to_string(slot.microbatch) + " a second time" +
               (previous != inFlight.end() ? " (first at " + previous->second.where + ")" : ""));
    failed = true;
    return false;
  }
  inFlight.emplace(key, SentMessage{s.device->rank, slot.phase, slot.chunk, slot.microbatch,
                                    attr(inst, "peer_chunk"), s.inst, inputOf(s), where(s)});
  return true;
}

/// Takes the matching send if it was issued; false while it has not been.
bool Simulation::receive(RankState &s) {
  const InstructionSpec &inst = instOf(s);
  const ScheduleSlot &slot = slotOf(s);
  int64_t tag = attr(inst, "tag"), peerStage = attr(inst, "peer_stage");
  TransferKey key{peerStage, s.device->stage, s.device->dp, s.device->tp, slot.microbatch, tag};
  auto it = inFlight.find(key);
  if (it == inFlight.end())
    return false;
  const SentMessage &sent = it->second;
  // The send must come from the slot the recv names: same phase, the recv's
  // peer_chunk, and it must be addressed to this chunk.
  int64_t peerChunk = attr(inst, "peer_chunk");
  if (sent.phase != slot.phase || sent.chunk != peerChunk || sent.peerChunk != slot.chunk) {
    report.add(where(s) + ": expects tag " + std::to_string(tag) + " from " +
               slotLabel(slot.phase, peerChunk, slot.microbatch) + " of stage " +
               std::to_string(peerStage) + ", but it comes from " + sent.where +
               ", addressed to chunk " + std::to_string(sent.peerChunk));
    failed = true;
    return false;
  }
  TensorDesc desc = s.program->buffers[inst.outputs[0]].desc;
  if (desc != sent.desc) {
    report.add(where(s) + ": receives tag " + std::to_string(tag) + " as " + shapeOf(desc) +
               ", but " + sent.where + " sends " + shapeOf(sent.desc));
    failed = true;
    return false;
  }
  inFlight.erase(it);
  delivered.insert(key);
  ++result.transfers;
  return true;
}

/// Completes every collective whose whole group waits in one of the same
/// group kind; members that disagree are an error.
bool Simulation::completeCollectives() {
  bool progress = false;
  for (RankState &s : states) {
    if (s.finished || !s.blocked || !isCollective(instOf(s).kernel))
      continue;
    std::string kind = groupKind(instOf(s));
    const std::vector<int64_t> *group = plan.groupOf(kind, s.device->rank);
    bool all = true;
    for (int64_t r : *group) {
      const RankState &m = states[r];
      all &= !m.finished && m.blocked && isCollective(instOf(m).kernel) &&
             groupKind(instOf(m)) == kind;
    }
    if (!all)
      continue;
    const RankState &first = states[group->front()];
    const InstructionSpec &a = instOf(first);
    for (int64_t r : *group) {
      const RankState &m = states[r];
      const InstructionSpec &b = instOf(m);
      TensorDesc ia = inputOf(first), ib = inputOf(m);
      bool same = b.kernel == a.kernel && ib == ia;
      bool sameAttrs = b.attrs.all() == a.attrs.all();
      // The tp programs of a stage come from one function: two collectives
      // from different source lines pair up only if the order slipped.
      bool sameLoc = a.loc.empty() || b.loc.empty() || a.loc == b.loc;
      if (same && sameAttrs && sameLoc)
        continue;
      auto entry = [&](const InstructionSpec &inst, const TensorDesc &in) {
        return inst.kernel + " of " + shapeOf(in) +
               (same && !sameAttrs ? " " + attrsLabel(inst.attrs) : "") +
               (same && sameAttrs ? " at " + inst.loc : "");
      };
      report.add(where(m) + ": " + kind + " group " + rankList(*group) + " disagrees: rank " +
                 std::to_string(first.device->rank) + " enters " + entry(a, ia) + ", rank " +
                 std::to_string(m.device->rank) + " " + entry(b, ib));
      failed = true;
      return false;
    }
    for (int64_t r : *group) {
      states[r].blocked = false;
      ++states[r].inst;
    }
    ++result.collectives;
    progress = true;
  }
  return progress;
}

/// Why the send a blocked recv waits for never comes.
std::string Simulation::whyNoSend(const RankState &s) const {
  const InstructionSpec &inst = instOf(s);
  int64_t tag = attr(inst, "tag"), peerStage = attr(inst, "peer_stage");
  int64_t sender = -1;
  for (const DeviceSpec &d : plan.devices)
    if (d.stage == peerStage && d.dp == s.device->dp && d.tp == s.device->tp)
      sender = d.rank;
  std::string head =
      "waits for tag " + std::to_string(tag) + " from stage " + std::to_string(peerStage);
  bool sends = false; // does the sender's program ever send this tag here?
  if (sender >= 0)
    for (const Phase &phase : states[sender].program->phases)
      for (const InstructionSpec &i : phase.instructions)
        sends |=
            i.kernel == "send" && attr(i, "tag") == tag && attr(i, "peer_stage") == s.device->stage;
  if (!sends)
    return head + ", which never sends it";
  return head + " (rank " + std::to_string(sender) + "), which has not sent it: rank " +
         std::to_string(sender) + " " + stateOf(sender);
}

/// Why a collective's group never assembles: the first member elsewhere.
std::string Simulation::whyGroupWaits(const RankState &s) const {
  const InstructionSpec &inst = instOf(s);
  std::string kind = groupKind(inst);
  const std::vector<int64_t> *group = plan.groupOf(kind, s.device->rank);
  std::string head = "waits in " + inst.kernel + " for " + kind + " group " + rankList(*group);
  for (int64_t r : *group) {
    const RankState &m = states[r];
    if (m.finished || !m.blocked || !isCollective(instOf(m).kernel) || groupKind(instOf(m)) != kind)
      return head + ": rank " + std::to_string(r) + " " + stateOf(r) +
             (m.finished || !isCollective(instOf(m).kernel)
                  ? ""
                  : ", a " + groupKind(instOf(m)) + " collective");
  }
  return head;
}

/// Each blocked rank with what it waits for: recvs first, as a missing send
/// is usually what leaves the collectives of the receivers' groups waiting.
void Simulation::reportDeadlock() {
  for (bool recvs : {true, false})
    for (const RankState &s : states) {
      if (s.finished || !s.blocked || (instOf(s).kernel == "recv") != recvs)
        continue;
      report.add(where(s) + ": " + (recvs ? whyNoSend(s) : whyGroupWaits(s)));
    }
}

//===--------------------------------------------------------------------===//
// Static checks.
//===--------------------------------------------------------------------===//

/// The first rank running `program`, for messages: "rank 1 (stage0_tp1)".
std::string programLabel(const Plan &plan, const ProgramSpec &program) {
  for (const DeviceSpec &d : plan.devices)
    if (d.program == program.name)
      return "rank " + std::to_string(d.rank) + " (" + program.name + ")";
  return "program " + program.name;
}

/// What the simulation relies on: buffer ids in range, the kernels that
/// communicate with their operands and attributes, schedule slots naming
/// phases that exist, groups that exist. loadPlan checks all of it; a
/// hand-built Plan may not. Returns false if anything is missing.
bool checkStructure(const Plan &plan, Reporter &report) {
  size_t before = report.errors.size();
  auto fail = [&](const std::string &message) { report.add(message); };
  int64_t rankCount = static_cast<int64_t>(plan.devices.size());
  if (rankCount != plan.pp * plan.tp * plan.dp)
    fail("the plan has " + std::to_string(rankCount) + " ranks for a mesh of pp " +
         std::to_string(plan.pp) + " x tp " + std::to_string(plan.tp) + " x dp " +
         std::to_string(plan.dp));
  if (static_cast<int64_t>(plan.stageSlots.size()) != plan.pp)
    fail("the schedule has " + std::to_string(plan.stageSlots.size()) + " stages, the mesh " +
         std::to_string(plan.pp));
  for (int64_t r = 0; r < rankCount; ++r) {
    const DeviceSpec &d = plan.devices[r];
    const ProgramSpec *program = plan.programForRank(d.rank);
    if (d.rank != r || !program || d.stage < 0 || d.stage >= plan.pp ||
        static_cast<int64_t>(plan.stageSlots.size()) != plan.pp) {
      fail("rank " + std::to_string(r) + ": no program or stage");
      continue;
    }
    for (const ScheduleSlot &slot : plan.stageSlots[d.stage])
      if (!program->findPhase(slot.phase, slot.chunk, slot.microbatch))
        fail("rank " + std::to_string(r) + " (" + program->name + "): has no " +
             slotLabel(slot.phase, slot.chunk) + " for its schedule");
    for (const char *kind : {"tp", "dp"}) {
      const std::vector<int64_t> *group = plan.groupOf(kind, r);
      bool valid = group && std::find(group->begin(), group->end(), r) != group->end();
      for (int64_t m : group ? *group : std::vector<int64_t>())
        valid &= m >= 0 && m < rankCount;
      if (!valid)
        fail("rank " + std::to_string(r) + ": no " + kind + " group");
    }
  }
  for (const auto &[name, program] : plan.programs)
    for (const Phase &phase : program.phases)
      for (size_t i = 0; i < phase.instructions.size(); ++i) {
        const InstructionSpec &inst = phase.instructions[i];
        std::string label = programLabel(plan, program) + ", " +
                            slotLabel(phase.name, phase.chunk) + ", " + instructionLabel(i, inst) +
                            ": ";
        int64_t count = static_cast<int64_t>(program.buffers.size());
        for (const std::optional<int64_t> &id : inst.inputs)
          if (id && (*id < 0 || *id >= count))
            fail(label + "missing buffer " + std::to_string(*id));
        for (int64_t id : inst.outputs)
          if (id < 0 || id >= count)
            fail(label + "missing buffer " + std::to_string(id));
        bool isSend = inst.kernel == "send", isRecv = inst.kernel == "recv";
        if (!isSend && !isRecv && !isGroupKernel(inst.kernel))
          continue;
        size_t wantIn = isRecv ? 0 : 1, wantOut = isSend ? 0 : 1;
        if (inst.inputs.size() != wantIn || inst.outputs.size() != wantOut ||
            (wantIn && !inst.inputs[0]))
          fail(label + inst.kernel + " takes " + std::to_string(wantIn) + " input(s) and " +
               std::to_string(wantOut) + " output(s)");
        int64_t v = 0;
        std::string group;
        if (isSend || isRecv) {
          for (const char *a : {"peer_stage", "peer_chunk", "tag"})
            if (!inst.attrs.getInt(a, &v).ok())
              fail(label + "no integer attribute '" + a + "'");
          if (inst.attrs.getInt("peer_stage", &v).ok() && (v < 0 || v >= plan.pp))
            fail(label + "peer_stage " + std::to_string(v) + " is not a stage");
        } else if (!inst.attrs.getString("group", &group).ok() ||
                   (group != "tp" && group != "dp")) {
          fail(label + "group must be 'tp' or 'dp'");
        }
      }
  return report.errors.size() == before;
}

/// Layout changes: the output's shape follows from the input's and the
/// group's size.
void checkCollectiveShapes(const Plan &plan, Reporter &report) {
  for (const auto &[name, program] : plan.programs)
    for (const Phase &phase : program.phases)
      for (size_t i = 0; i < phase.instructions.size(); ++i) {
        const InstructionSpec &inst = phase.instructions[i];
        if (!isGroupKernel(inst.kernel))
          continue;
        std::string label = programLabel(plan, program) + ", " +
                            slotLabel(phase.name, phase.chunk) + ", " + instructionLabel(i, inst) +
                            ": ";
        std::string kind;
        (void)inst.attrs.getString("group", &kind);
        int64_t n = kind == "tp" ? plan.tp : plan.dp;
        const TensorDesc &in = program.buffers[*inst.inputs[0]].desc;
        const TensorDesc &out = program.buffers[inst.outputs[0]].desc;
        Shape want;
        std::string how;
        if (Status s = expectedCollectiveShape(inst, in, n, &want, &how); !s.ok()) {
          report.add(label + s.message());
          continue;
        }
        TensorDesc expected{in.dtype, want};
        if (out != expected)
          report.add(label + "output " + shapeOf(out) + " should be " + shapeOf(expected) +
                     ": input " + shapeOf(in) + " " + how + " over a " + kind + " group of " +
                     std::to_string(n));
      }
}

/// One program's hold on one parameter.
struct Holding {
  const ProgramSpec *program;
  WeightShard shard;
  TensorDesc desc;
};

std::string partLabel(const WeightShard &w) {
  return std::to_string(w.part) + "/" + std::to_string(w.parts);
}

std::string splitLabel(const WeightShard &w) {
  return "split(" + std::to_string(w.dim) +
         (w.blocks > 1 ? ", blocks=" + std::to_string(w.blocks) : "") + ") into " +
         std::to_string(w.parts);
}

/// One parameter in one stage: held whole (by one or more of its tp
/// programs: a row-parallel bias may be read on tp index 0 only), or split
/// into parts 0..N-1 held exactly once each, N the tp degree, part T by tp
/// index T, whose shapes put back together make the parameter's.
void checkParameterInStage(const Plan &plan, int64_t stage, const std::string &name,
                           const TensorDesc &full, const std::vector<Holding> &holdings,
                           Reporter &report) {
  std::string head =
      "stage " + std::to_string(stage) + ": parameter '" + name + "' (" + shapeOf(full) + ")";
  const Holding *whole = nullptr, *split = nullptr;
  for (const Holding &h : holdings)
    (h.shard.split ? split : whole) = &h;
  if (whole && split)
    return report.add(head + ": " + whole->program->name + " holds it whole, " +
                      split->program->name + " holds part " + partLabel(split->shard));
  if (whole) {
    for (const Holding &h : holdings)
      if (h.desc != full)
        report.add(head + ": " + h.program->name + " holds it whole as " + shapeOf(h.desc));
    return;
  }
  const WeightShard &first = split->shard;
  for (const Holding &h : holdings)
    if (h.shard.dim != first.dim || h.shard.blocks != first.blocks || h.shard.parts != first.parts)
      return report.add(head + ": " + holdings.front().program->name + " holds a part of " +
                        splitLabel(holdings.front().shard) + ", " + h.program->name + " of " +
                        splitLabel(h.shard));
  if (first.parts != plan.tp)
    return report.add(head + ": " + splitLabel(first) + " parts over a tp group of " +
                      std::to_string(plan.tp));
  std::map<int64_t, std::vector<std::string>> holders;
  for (const Holding &h : holdings)
    holders[h.shard.part].push_back(h.program->name);
  for (int64_t t = 0; t < first.parts; ++t) {
    WeightShard part = first;
    part.part = t;
    const std::vector<std::string> &who = holders[t];
    if (who.empty())
      return report.add(head + ": part " + partLabel(part) + " is held by no program");
    if (who.size() > 1)
      return report.add(head + ": part " + partLabel(part) + " is held by " + who[0] + " and " +
                        who[1]);
  }
  for (const Holding &h : holdings) {
    if (h.shard.part != h.program->tp)
      report.add(head + ": " + h.program->name + " holds part " + partLabel(h.shard) +
                 " but is tp index " + std::to_string(h.program->tp));
    TensorDesc whole = h.desc;
    std::optional<int64_t> pieces = checkedMul(h.shard.blocks, h.shard.parts);
    std::optional<int64_t> size =
        h.shard.dim < whole.rank() ? checkedMul(whole.shape[h.shard.dim], h.shard.parts)
                                   : std::nullopt;
    bool fits = whole.rank() == full.rank() && pieces && size && *pieces > 0 &&
                full.shape[h.shard.dim] % *pieces == 0;
    if (fits)
      whole.shape[h.shard.dim] = *size;
    if (!fits || whole != full)
      return report.add(head + ": " + h.program->name + " holds part " + partLabel(h.shard) +
                        " as " + shapeOf(h.desc) + "; " + std::to_string(h.shard.parts) +
                        " such parts along dim " + std::to_string(h.shard.dim) +
                        (fits ? " make " + shapeOf(whole) : " cannot make it"));
  }
}

/// Every parameter's shards cover it exactly once in each stage that reads
/// it, and some stage reads every parameter.
void checkWeightCoverage(const Plan &plan, Reporter &report) {
  if (plan.parameters.empty())
    return;
  std::set<std::string> read;
  for (int64_t stage = 0; stage < plan.pp; ++stage) {
    std::map<std::string, std::vector<Holding>> holdings;
    for (const auto &[name, program] : plan.programs) {
      if (program.stage != stage)
        continue;
      std::set<std::string> seen; // views of one weight count once
      for (const BufferSpec &buffer : program.buffers) {
        if (!buffer.weight || !seen.insert(*buffer.weight).second)
          continue;
        WeightShard shard;
        if (!parseWeightShard(*buffer.weight, &shard)) {
          report.add(programLabel(plan, program) + ": buffer " + std::to_string(buffer.id) +
                     " reads weight '" + *buffer.weight +
                     "', which is neither PATH nor PATH[split(DIM) T/N]");
          continue;
        }
        if (!plan.parameters.count(shard.parameter)) {
          if (shard.split) // constants are held whole; a part must be of a parameter
            report.add(programLabel(plan, program) + ": weight '" + *buffer.weight +
                       "' is a part of '" + shard.parameter +
                       "', which the manifest's parameters do not list");
          continue;
        }
        // The stored tensor's shape when there are weights (a buffer may view
        // it with another shape), else the buffer's.
        TensorDesc desc = buffer.desc;
        if (const SafetensorsEntry *entry = program.weights.find(*buffer.weight))
          desc = entry->desc;
        holdings[shard.parameter].push_back({&program, shard, desc});
      }
    }
    for (const auto &[param, list] : holdings) {
      read.insert(param);
      checkParameterInStage(plan, stage, param, plan.parameters.at(param), list, report);
    }
  }
  for (const auto &[param, desc] : plan.parameters)
    if (!read.count(param))
      report.add("parameter '" + param + "' (" + shapeOf(desc) + ") is read by no stage");
}

} // namespace

bool parseWeightShard(const std::string &name, WeightShard *out) {
  *out = WeightShard();
  size_t open = name.find('[');
  if (open == std::string::npos) {
    out->parameter = name;
    return true;
  }
  // "[split(D) P/N]" or "[split(D, blocks=B) P/N]", read by hand: the name
  // comes from a file, and std::regex recurses once per character matched.
  std::string_view tail(name);
  tail.remove_prefix(open);
  auto eat = [&](std::string_view text) {
    if (tail.substr(0, text.size()) != text)
      return false;
    tail.remove_prefix(text.size());
    return true;
  };
  auto number = [&](int64_t *value) {
    size_t n = 0;
    while (n < tail.size() && tail[n] >= '0' && tail[n] <= '9')
      ++n;
    std::optional<int64_t> parsed = parseDecimal(tail.substr(0, n));
    if (!parsed)
      return false; // no digits, or more than fit in 64 bits
    *value = *parsed;
    tail.remove_prefix(n);
    return true;
  };
  int64_t dim = 0, blocks = 1, part = 0, parts = 0;
  if (!eat("[split(") || !number(&dim))
    return false;
  if (eat(",")) {
    while (eat(" ")) {
    }
    if (!eat("blocks=") || !number(&blocks))
      return false;
  }
  if (!eat(") ") || !number(&part) || !eat("/") || !number(&parts) || !eat("]") || !tail.empty())
    return false;
  out->parameter = name.substr(0, open);
  out->split = true;
  out->dim = dim;
  out->blocks = blocks;
  out->part = part;
  out->parts = parts;
  return !out->parameter.empty() && out->blocks >= 1 && out->parts >= 1 && out->part < out->parts;
}

bool isPartOf(const std::string &name, const std::string &tensor, WeightShard *out) {
  return name.size() > tensor.size() && name[tensor.size()] == '[' &&
         name.compare(0, tensor.size(), tensor) == 0 && parseWeightShard(name, out) && out->split;
}

VerifyResult verifyPlan(const Plan &plan, size_t maxErrors) {
  VerifyResult result;
  result.ranks = static_cast<int64_t>(plan.devices.size());
  result.programs = static_cast<int64_t>(plan.programs.size());
  Reporter report{result.errors, std::max<size_t>(maxErrors, 1)};
  // A plan is a file: an exception escaping a check (a bug, memory exhausted)
  // is one more error, never an abort.
  Status ran = catchExceptions(plan.dir, [&] {
    if (!checkStructure(plan, report))
      return Status();
    checkCollectiveShapes(plan, report);
    checkWeightCoverage(plan, report);
    if (!report.full())
      Simulation(plan, report, result).run();
    return Status();
  });
  if (!ran.ok())
    result.errors.push_back(ran.message());
  return result;
}

} // namespace cleave::runtime
