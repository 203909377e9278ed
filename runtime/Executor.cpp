#include "runtime/Executor.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace cleave::runtime {
namespace {

std::string instructionLabel(const Phase &phase, size_t index, const InstructionSpec &inst) {
  std::string label =
      phase.name + " instruction " + std::to_string(index) + " (" + inst.kernel + ")";
  if (!inst.loc.empty())
    label += " at " + inst.loc;
  return label;
}

/// "buffer 4 (fc1.weight), a host weight".
std::string whatBuffer(const BufferSpec &b) {
  std::string where = b.arenaOffset ? "an arena buffer"
                      : b.state     ? std::string("a ") + poolName(b.pool) + " state"
                                    : std::string("a ") + poolName(b.pool) + " weight";
  return "buffer " + std::to_string(b.id) + " (" + b.name + "), " + where;
}

/// The contract of the copies (docs/plan-format.md, "Spilling to host
/// memory"): `prefetch` copies a weight or state of the host pool into an
/// arena buffer, `spill` an arena buffer into a weight or state of the host
/// pool (updated in place); same shape and dtype, no attributes.
Status checkCopy(const ProgramSpec &program, const InstructionSpec &inst) {
  const bool prefetch = inst.kernel == "prefetch";
  const std::string &k = inst.kernel;
  if (inst.inputs.size() != 1 || !inst.inputs[0] || inst.outputs.size() != 1)
    return CLEAVE_ERROR(k, ": expects 1 input and 1 output, got ", inst.inputs.size(), " and ",
                        inst.outputs.size());
  if (!inst.attrs.all().empty())
    return CLEAVE_ERROR(k, ": takes no attributes, got '", inst.attrs.all().begin()->first, "'");
  if (inst.scratchBytes)
    return CLEAVE_ERROR(k, ": takes no scratch, got ", inst.scratchBytes, " bytes");
  const BufferSpec &in = program.buffers[*inst.inputs[0]];
  const BufferSpec &out = program.buffers[inst.outputs[0]];
  if (prefetch && !in.onHost())
    return CLEAVE_ERROR(k, ": input 0 (source) is ", whatBuffer(in),
                        "; prefetch copies from a weight or state in the host pool");
  if (prefetch && !out.arenaOffset)
    return CLEAVE_ERROR(k, ": output 0 (destination) is ", whatBuffer(out),
                        "; prefetch copies into an arena buffer");
  if (!prefetch && !in.arenaOffset)
    return CLEAVE_ERROR(k, ": input 0 (source) is ", whatBuffer(in),
                        "; spill copies from an arena buffer");
  if (!prefetch && !out.onHost())
    return CLEAVE_ERROR(k, ": output 0 (destination) is ", whatBuffer(out),
                        "; spill copies into a weight or state in the host pool");
  if (in.desc != out.desc)
    return CLEAVE_ERROR(k, ": output 0 (destination) ", whatBuffer(out), ", is ",
                        describe(out.desc.shape, out.desc.dtype), " but input 0 (source) ",
                        whatBuffer(in), ", is ", describe(in.desc.shape, in.desc.dtype),
                        ": a copy keeps the shape and dtype");
  return {};
}

/// Host memory of the host pool: 64-byte aligned, as the backend's.
Status allocateHost(size_t bytes, void **out) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (rounded < bytes)
    return CLEAVE_ERROR("cannot allocate ", bytes, " bytes of host memory: size overflows");
  *out = std::aligned_alloc(64, rounded);
  if (!*out)
    return CLEAVE_ERROR("out of host memory allocating the host pool's ", bytes, " bytes");
  return {};
}

} // namespace

void Executor::FreeHost::operator()(void *p) const { std::free(p); }

CopyStats CopyStats::operator-(const CopyStats &before) const {
  CopyStats d;
  d.prefetchBytes = prefetchBytes - before.prefetchBytes;
  d.spillBytes = spillBytes - before.spillBytes;
  d.prefetches = prefetches - before.prefetches;
  d.spills = spills - before.spills;
  d.copySeconds = copySeconds - before.copySeconds;
  d.stallSeconds = stallSeconds - before.stallSeconds;
  return d;
}

Status Executor::create(const ProgramSpec &program, Backend &backend,
                        std::unique_ptr<Executor> *out, int64_t dpIndex) {
  // The program came from a file: an exception from a kernel's preparation
  // (a bug, memory exhausted) is an error naming it, never an abort.
  return catchExceptions(program.file, [&] { return createImpl(program, backend, out, dpIndex); });
}

Status Executor::createImpl(const ProgramSpec &program, Backend &backend,
                            std::unique_ptr<Executor> *out, int64_t dpIndex) {
  std::unique_ptr<Executor> executor(new Executor(program, backend));

  // A spilled plan needs a backend with a copy queue whose kernels also
  // run on host memory (the CPU's, for now): asked once, here.
  bool copies = false;
  for (const Phase &phase : program.phases)
    for (const InstructionSpec &inst : phase.instructions)
      copies |= isCopyKernel(inst.kernel);
  if (program.hostPool || copies)
    CLEAVE_RETURN_IF_ERROR(backend.createCopyQueue(&executor->copies_).prepend(program.file));

  // Weights a kernel may rewrite into its own layout: those of a
  // forward-only program (a training program's weights are updated, saved
  // and restored by name), read by one instruction, written by none, in
  // device memory, and no copy queue (spilled plans move weights between
  // pools).
  bool forwardOnly = program.stateBytes == 0 && program.hostStateBytes == 0;
  for (const Phase &phase : program.phases)
    forwardOnly &= phase.name == "forward";
  std::map<std::string, int> weightReaders, weightWriters;
  for (const Phase &phase : program.phases)
    for (const InstructionSpec &inst : phase.instructions) {
      for (const std::optional<int64_t> &id : inst.inputs)
        if (id && program.buffers[*id].weight)
          ++weightReaders[*program.buffers[*id].weight];
      for (int64_t id : inst.outputs)
        if (program.buffers[id].weight)
          ++weightWriters[*program.buffers[id].weight];
    }
  auto ownedConstant = [&](const std::optional<int64_t> &id) {
    if (!id || !forwardOnly || copies || program.hostPool)
      return false;
    const BufferSpec &buffer = program.buffers[*id];
    return buffer.weight && !buffer.onHost() && !buffer.shardOf &&
           weightReaders[*buffer.weight] == 1 && weightWriters[*buffer.weight] == 0;
  };

  // Validate every instruction before allocating or reading anything.
  for (const Phase &phase : program.phases) {
    std::vector<Prepared> prepared;
    for (size_t i = 0; i < phase.instructions.size(); ++i) {
      const InstructionSpec &inst = phase.instructions[i];
      std::string label = program.file + ": " + instructionLabel(phase, i, inst);
      if (isCopyKernel(inst.kernel)) {
        CLEAVE_RETURN_IF_ERROR(checkCopy(program, inst).prepend(label));
        Prepared p{&inst, {}, {}};
        p.copy = inst.kernel == "prefetch" ? Copy::Prefetch : Copy::Spill;
        prepared.push_back(std::move(p));
        continue;
      }
      if (!backend.hasKernel(inst.kernel))
        return CLEAVE_ERROR(label, ": the ", backend.name(), " backend has no kernel '",
                            inst.kernel, "'");
      KernelSignature signature;
      signature.kernel = inst.kernel;
      for (const std::optional<int64_t> &id : inst.inputs) {
        signature.inputs.push_back(id ? std::optional<TensorDesc>(program.buffers[*id].desc)
                                      : std::nullopt);
        signature.ownedConstants.push_back(ownedConstant(id));
      }
      for (int64_t id : inst.outputs)
        signature.outputs.push_back(program.buffers[id].desc);
      signature.scratchBytes = inst.scratchBytes;
      signature.attrs = inst.attrs;
      Prepared p{&inst, {}, {}};
      CLEAVE_RETURN_IF_ERROR(backend.prepareKernel(signature, &p.fn).prepend(label));
      prepared.push_back(std::move(p));
    }
    executor->phases_.emplace_back(phase.name, std::move(prepared));
  }

  CLEAVE_RETURN_IF_ERROR(backend.allocate(program.arenaBytes, &executor->arena_));
  CLEAVE_RETURN_IF_ERROR(backend.allocate(program.weightRegionBytes, &executor->weights_));
  if (program.stateBytes > 0) {
    // Optimizer moments and the step counter start at zero.
    CLEAVE_RETURN_IF_ERROR(backend.allocate(program.stateBytes, &executor->state_));
    std::vector<char> zeros(program.stateBytes, 0);
    CLEAVE_RETURN_IF_ERROR(backend.copyToDevice(executor->state_, zeros.data(), zeros.size()));
  }
  // The host pool: plain host memory, the host state zeroed as the state.
  if (program.hostWeightRegionBytes > 0) {
    void *p = nullptr;
    CLEAVE_RETURN_IF_ERROR(allocateHost(program.hostWeightRegionBytes, &p).prepend(program.file));
    executor->hostWeights_.reset(p);
  }
  if (program.hostStateBytes > 0) {
    void *p = nullptr;
    CLEAVE_RETURN_IF_ERROR(allocateHost(program.hostStateBytes, &p).prepend(program.file));
    executor->hostState_.reset(p);
    std::memset(p, 0, program.hostStateBytes);
  }
  if (program.slottedWeights) {
    // ZeRO parts or host-pool weights: the file read once, each weight into
    // its slot (of the device or the host weights), a part cut from the
    // whole.
    std::vector<char> file(program.weights.dataBytes), part;
    CLEAVE_RETURN_IF_ERROR(readSafetensorsData(program.weights, file.data()));
    for (const SafetensorsEntry &entry : program.weights.entries) {
      const ProgramSpec::WeightSlot &slot = program.weightSlots.at(entry.name);
      const char *from = file.data() + entry.begin;
      if (program.weightShard(entry.name)) {
        part.resize(slot.bytes);
        copyZeroPart(from, entry.desc.bytes(), dpIndex, part.data(), part.size());
        from = part.data();
      }
      if (slot.host) {
        if (slot.bytes)
          std::memcpy(static_cast<char *>(executor->hostWeights_.get()) + slot.offset, from,
                      slot.bytes);
        continue;
      }
      CLEAVE_RETURN_IF_ERROR(backend.copyToDevice(static_cast<char *>(executor->weights_) +
                                                      slot.offset,
                                                  from, slot.bytes));
    }
  } else if (program.weights.dataBytes > 0) {
    // Weights are read on the host, then copied (a no-op move on CPU).
    if (backend.sharesHostMemory()) {
      CLEAVE_RETURN_IF_ERROR(readSafetensorsData(program.weights, executor->weights_));
    } else {
      std::vector<char> host(program.weights.dataBytes);
      CLEAVE_RETURN_IF_ERROR(readSafetensorsData(program.weights, host.data()));
      CLEAVE_RETURN_IF_ERROR(backend.copyToDevice(executor->weights_, host.data(), host.size()));
    }
  }

  // Data pointers are fixed from here on: resolve them once, and with a
  // copy queue what each instruction touches, to order it after the copies.
  for (auto &[name, prepared] : executor->phases_)
    for (Prepared &p : prepared) {
      for (const std::optional<int64_t> &id : p.spec->inputs)
        p.call.inputs.push_back(id ? executor->bufferData(*id) : nullptr);
      for (int64_t id : p.spec->outputs)
        p.call.outputs.push_back(executor->bufferData(id));
      p.call.scratch = p.spec->scratchBytes
                           ? static_cast<char *>(executor->arena_) + p.spec->scratchOffset
                           : nullptr;
      if (!executor->copies_)
        continue;
      auto add = [&](const Span &span, bool write) {
        if (span.begin == span.end)
          return;
        p.touches.push_back(span);
        if (write)
          p.writes.push_back(span);
      };
      for (const std::optional<int64_t> &id : p.spec->inputs)
        if (id)
          add(executor->bufferSpan(*id), false);
      for (int64_t id : p.spec->outputs)
        add(executor->bufferSpan(id), true);
      add(Span{Region::Arena, p.spec->scratchOffset, p.spec->scratchOffset + p.spec->scratchBytes},
          true);
    }
  *out = std::move(executor);
  return {};
}

Executor::~Executor() {
  // The copy queue finishes what it was given before the memory goes.
  copies_.reset();
  if (arena_)
    backend_.deallocate(arena_);
  if (weights_)
    backend_.deallocate(weights_);
  if (state_)
    backend_.deallocate(state_);
}

void *Executor::bufferData(int64_t id) const {
  const BufferSpec &buffer = program_.buffers[id];
  if (buffer.arenaOffset)
    return static_cast<char *>(arena_) + *buffer.arenaOffset;
  if (buffer.stateOffset)
    return static_cast<char *>(buffer.onHost() ? hostState_.get() : state_) + *buffer.stateOffset;
  const ProgramSpec::WeightSlot &slot = program_.weightSlots.at(*buffer.weight);
  return static_cast<char *>(slot.host ? hostWeights_.get() : weights_) + slot.offset;
}

Executor::Span Executor::bufferSpan(int64_t id) const {
  const BufferSpec &buffer = program_.buffers[id];
  const size_t bytes = buffer.desc.bytes();
  if (buffer.arenaOffset)
    return {Region::Arena, *buffer.arenaOffset, *buffer.arenaOffset + bytes};
  if (buffer.stateOffset)
    return {buffer.onHost() ? Region::HostState : Region::State, *buffer.stateOffset,
            *buffer.stateOffset + bytes};
  const ProgramSpec::WeightSlot &slot = program_.weightSlots.at(*buffer.weight);
  return {slot.host ? Region::HostWeights : Region::Weights, slot.offset, slot.offset + bytes};
}

const Binding *Executor::findBinding(const std::vector<Binding> &list,
                                     const std::string &name) const {
  for (const Binding &b : list)
    if (b.name == name)
      return &b;
  return nullptr;
}

Status Executor::copyIn(const std::vector<Binding> &bindings, const std::string &name,
                        const void *data, size_t bytes) {
  const Binding *binding = findBinding(bindings, name);
  if (!binding)
    return CLEAVE_ERROR("the program has no input '", name, "'");
  const BufferSpec &buffer = program_.buffers[binding->buffer];
  if (bytes != buffer.desc.bytes())
    return CLEAVE_ERROR("input '", name, "' needs ", buffer.desc.bytes(), " bytes, got ", bytes);
  return backend_.copyToDevice(bufferData(binding->buffer), data, bytes);
}

Status Executor::copyOut(const std::vector<Binding> &bindings, const std::string &name, void *data,
                         size_t bytes) const {
  const Binding *binding = findBinding(bindings, name);
  if (!binding)
    return CLEAVE_ERROR("the program has no output '", name, "'");
  const BufferSpec &buffer = program_.buffers[binding->buffer];
  if (bytes != buffer.desc.bytes())
    return CLEAVE_ERROR("output '", name, "' has ", buffer.desc.bytes(), " bytes, asked for ",
                        bytes);
  return backend_.copyToHost(data, bufferData(binding->buffer), bytes);
}

Status Executor::setInput(const std::string &name, const void *data, size_t bytes) {
  return copyIn(program_.inputs, name, data, bytes);
}

Status Executor::getOutput(const std::string &name, void *data, size_t bytes) const {
  return copyOut(program_.outputs, name, data, bytes);
}

Status Executor::setPhaseInput(size_t index, const std::string &name, const void *data,
                               size_t bytes) {
  if (index >= program_.phases.size())
    return CLEAVE_ERROR(program_.file, ": no phase ", index);
  return copyIn(program_.phases[index].inputs, name, data, bytes)
      .prepend(program_.file + ": phase " + std::to_string(index));
}

Status Executor::getPhaseOutput(size_t index, const std::string &name, void *data,
                                size_t bytes) const {
  if (index >= program_.phases.size())
    return CLEAVE_ERROR(program_.file, ": no phase ", index);
  return copyOut(program_.phases[index].outputs, name, data, bytes)
      .prepend(program_.file + ": phase " + std::to_string(index));
}

Status Executor::setInputs(const SafetensorsIndex &inputs) {
  std::set<std::string> expected;
  for (const Binding &binding : program_.inputs) {
    expected.insert(binding.name);
    const TensorDesc &desc = program_.buffers[binding.buffer].desc;
    const SafetensorsEntry *entry = inputs.find(binding.name);
    if (!entry)
      return CLEAVE_ERROR(inputs.path, ": missing input '", binding.name, "' (",
                          describe(desc.shape, desc.dtype), ")");
    if (entry->desc != desc)
      return CLEAVE_ERROR(inputs.path, ": input '", binding.name, "' is ",
                          describe(entry->desc.shape, entry->desc.dtype), ", the plan expects ",
                          describe(desc.shape, desc.dtype));
  }
  for (const SafetensorsEntry &entry : inputs.entries)
    if (!expected.count(entry.name)) {
      std::string names;
      for (const std::string &n : expected)
        names += (names.empty() ? "" : ", ") + n;
      return CLEAVE_ERROR(inputs.path, ": unexpected input '", entry.name,
                          "' (the plan's inputs: ", names, ")");
    }
  for (const SafetensorsEntry &entry : inputs.entries) {
    std::vector<char> data(entry.desc.bytes());
    CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(inputs, entry, data.data()));
    CLEAVE_RETURN_IF_ERROR(setInput(entry.name, data.data(), data.size()));
  }
  return {};
}

Status Executor::writeOutputs(const std::string &path) const {
  std::vector<std::vector<char>> data;
  std::vector<SafetensorsTensor> tensors;
  for (const Binding &binding : program_.outputs) {
    const TensorDesc &desc = program_.buffers[binding.buffer].desc;
    data.emplace_back(desc.bytes());
    CLEAVE_RETURN_IF_ERROR(getOutput(binding.name, data.back().data(), data.back().size()));
    tensors.push_back({binding.name, desc, data.back().data()});
  }
  return writeSafetensors(path, tensors);
}

Status Executor::run(const std::string &phaseName) {
  for (size_t index = 0; index < phases_.size(); ++index)
    if (phases_[index].first == phaseName)
      return runPhase(index);
  return CLEAVE_ERROR(program_.file, ": no phase '", phaseName, "'");
}

Status Executor::runPhase(size_t index) {
  if (index >= phases_.size())
    return CLEAVE_ERROR(program_.file, ": no phase ", index, " (the program has ", phases_.size(),
                        ")");
  Status status = runInstructions(index);
  // A phase ends with its copies done, failed or not: nothing copies into
  // the executor's memory between phases.
  if (lastTicket_ > 0) {
    Status copied = awaitCopy(lastTicket_);
    if (status.ok())
      status = copied.prepend(program_.file + ": " + program_.phases[index].name);
  }
  CLEAVE_RETURN_IF_ERROR(status);
  return backend_.synchronize();
}

Status Executor::runInstructions(size_t index) {
  std::vector<Prepared> &prepared = phases_[index].second;
  const Phase &phase = program_.phases[index];
  if (profiling_)
    seconds_.assign(prepared.size(), 0.0);
  for (size_t i = 0; i < prepared.size(); ++i) {
    auto start = std::chrono::steady_clock::now();
    Prepared &p = prepared[i];
    Status status;
    if (p.copy != Copy::None) {
      // Copies run in issue order on the queue: one needs no wait for the
      // copies before it, and the kernels before it have finished.
      const bool toDevice = p.copy == Copy::Prefetch;
      const size_t bytes = program_.buffers[p.spec->outputs[0]].desc.bytes();
      uint64_t ticket = copies_->issue(p.call.outputs[0], p.call.inputs[0], bytes, toDevice);
      inFlight_.push_back({ticket, bufferSpan(*p.spec->inputs[0]), bufferSpan(p.spec->outputs[0])});
      lastTicket_ = ticket;
      (toDevice ? stats_.prefetchBytes : stats_.spillBytes) += bytes;
      ++(toDevice ? stats_.prefetches : stats_.spills);
    } else {
      if (!inFlight_.empty())
        status = awaitCopiesBefore(p);
      if (status.ok())
        status = p.fn(p.call);
    }
    if (!status.ok())
      return status.prepend(program_.file + ": " + instructionLabel(phase, i, *p.spec));
    if (profiling_) {
      CLEAVE_RETURN_IF_ERROR(backend_.synchronize());
      seconds_[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  return {};
}

Status Executor::awaitCopiesBefore(const Prepared &p) {
  // Forget the copies already done, then find the last one this
  // instruction must follow: waiting for it waits for those before it.
  const uint64_t done = copies_->done();
  while (!inFlight_.empty() && inFlight_.front().ticket <= done)
    inFlight_.pop_front();
  uint64_t need = 0;
  for (const InFlight &c : inFlight_) {
    bool hazard = false;
    for (const Span &s : p.touches)
      hazard |= overlap(c.destination, s);
    for (const Span &s : p.writes)
      hazard |= overlap(c.source, s);
    if (hazard)
      need = c.ticket;
  }
  return need ? awaitCopy(need) : Status();
}

Status Executor::awaitCopy(uint64_t ticket) {
  if (copies_->done() < ticket) {
    auto start = std::chrono::steady_clock::now();
    CLEAVE_RETURN_IF_ERROR(copies_->wait(ticket));
    stats_.stallSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  while (!inFlight_.empty() && inFlight_.front().ticket <= ticket)
    inFlight_.pop_front();
  return {};
}

CopyStats Executor::copyStats() const {
  CopyStats stats = stats_;
  if (copies_)
    stats.copySeconds = copies_->busySeconds();
  return stats;
}

} // namespace cleave::runtime

namespace cleave::runtime {

Status Executor::persistent(bool state, const std::string &name, size_t bytes, void **ptr,
                            bool *host) const {
  const char *what = state ? "state" : "weight";
  size_t size = 0;
  if (state) {
    const BufferSpec *found = nullptr;
    for (const BufferSpec &b : program_.buffers)
      if (b.state && *b.state == name)
        found = &b;
    if (!found)
      return CLEAVE_ERROR(program_.file, ": no state '", name, "'");
    *host = found->onHost();
    *ptr = static_cast<char *>(*host ? hostState_.get() : state_) + *found->stateOffset;
    size = found->desc.bytes();
  } else {
    auto slot = program_.weightSlots.find(name);
    if (slot == program_.weightSlots.end())
      return CLEAVE_ERROR(program_.weightsFile, ": no weight '", name, "'");
    *host = slot->second.host;
    *ptr = static_cast<char *>(*host ? hostWeights_.get() : weights_) + slot->second.offset;
    size = slot->second.bytes; // a ZeRO part's, when the program holds one
  }
  if (size != bytes)
    return CLEAVE_ERROR(what, " '", name, "' has ", size, " bytes, not ", bytes);
  return {};
}

// The host pool is host memory: read and written directly.

Status Executor::readWeight(const std::string &name, void *data, size_t bytes) const {
  void *ptr = nullptr;
  bool host = false;
  CLEAVE_RETURN_IF_ERROR(persistent(false, name, bytes, &ptr, &host));
  if (host) {
    std::memcpy(data, ptr, bytes);
    return {};
  }
  return backend_.copyToHost(data, ptr, bytes);
}

Status Executor::writeWeight(const std::string &name, const void *data, size_t bytes) {
  void *ptr = nullptr;
  bool host = false;
  CLEAVE_RETURN_IF_ERROR(persistent(false, name, bytes, &ptr, &host));
  if (host) {
    std::memcpy(ptr, data, bytes);
    return {};
  }
  return backend_.copyToDevice(ptr, data, bytes);
}

Status Executor::readState(const std::string &name, void *data, size_t bytes) const {
  void *ptr = nullptr;
  bool host = false;
  CLEAVE_RETURN_IF_ERROR(persistent(true, name, bytes, &ptr, &host));
  if (host) {
    std::memcpy(data, ptr, bytes);
    return {};
  }
  return backend_.copyToHost(data, ptr, bytes);
}

Status Executor::writeState(const std::string &name, const void *data, size_t bytes) {
  void *ptr = nullptr;
  bool host = false;
  CLEAVE_RETURN_IF_ERROR(persistent(true, name, bytes, &ptr, &host));
  if (host) {
    std::memcpy(ptr, data, bytes);
    return {};
  }
  return backend_.copyToDevice(ptr, data, bytes);
}

Status Executor::readStateRegion(void *data) const {
  if (program_.stateBytes)
    CLEAVE_RETURN_IF_ERROR(backend_.copyToHost(data, state_, program_.stateBytes));
  if (program_.hostStateBytes)
    std::memcpy(static_cast<char *>(data) + program_.stateBytes, hostState_.get(),
                program_.hostStateBytes);
  return {};
}

Status Executor::writeStateRegion(const void *data) {
  if (program_.stateBytes)
    CLEAVE_RETURN_IF_ERROR(backend_.copyToDevice(state_, data, program_.stateBytes));
  if (program_.hostStateBytes)
    std::memcpy(hostState_.get(), static_cast<const char *>(data) + program_.stateBytes,
                program_.hostStateBytes);
  return {};
}

} // namespace cleave::runtime
