#include "runtime/Executor.h"

#include <chrono>
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

} // namespace

Status Executor::create(const ProgramSpec &program, Backend &backend,
                        std::unique_ptr<Executor> *out, int64_t dpIndex) {
  // The program came from a file: an exception from a kernel's preparation
  // (a bug, memory exhausted) is an error naming it, never an abort.
  return catchExceptions(program.file, [&] { return createImpl(program, backend, out, dpIndex); });
}

Status Executor::createImpl(const ProgramSpec &program, Backend &backend,
                            std::unique_ptr<Executor> *out, int64_t dpIndex) {
  std::unique_ptr<Executor> executor(new Executor(program, backend));

  // Validate every instruction before allocating or reading anything.
  for (const Phase &phase : program.phases) {
    std::vector<Prepared> prepared;
    for (size_t i = 0; i < phase.instructions.size(); ++i) {
      const InstructionSpec &inst = phase.instructions[i];
      std::string label = program.file + ": " + instructionLabel(phase, i, inst);
      if (!backend.hasKernel(inst.kernel))
        return CLEAVE_ERROR(label, ": the ", backend.name(), " backend has no kernel '",
                            inst.kernel, "'");
      KernelSignature signature;
      signature.kernel = inst.kernel;
      for (const std::optional<int64_t> &id : inst.inputs)
        signature.inputs.push_back(id ? std::optional<TensorDesc>(program.buffers[*id].desc)
                                      : std::nullopt);
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
  if (!program.weightShards.empty()) {
    // ZeRO parts: the file read once, each weight into its slot, a part
    // cut from the whole.
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

  // Data pointers are fixed from here on: resolve them once.
  for (auto &[name, prepared] : executor->phases_)
    for (Prepared &p : prepared) {
      for (const std::optional<int64_t> &id : p.spec->inputs)
        p.call.inputs.push_back(id ? executor->bufferData(*id) : nullptr);
      for (int64_t id : p.spec->outputs)
        p.call.outputs.push_back(executor->bufferData(id));
      p.call.scratch = p.spec->scratchBytes
                           ? static_cast<char *>(executor->arena_) + p.spec->scratchOffset
                           : nullptr;
    }
  *out = std::move(executor);
  return {};
}

Executor::~Executor() {
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
    return static_cast<char *>(state_) + *buffer.stateOffset;
  return static_cast<char *>(weights_) + program_.weightSlots.at(*buffer.weight).offset;
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
  std::vector<Prepared> &prepared = phases_[index].second;
  const Phase &phase = program_.phases[index];
  if (profiling_)
    seconds_.assign(prepared.size(), 0.0);
  for (size_t i = 0; i < prepared.size(); ++i) {
    auto start = std::chrono::steady_clock::now();
    Status status = prepared[i].fn(prepared[i].call);
    if (!status.ok())
      return status.prepend(program_.file + ": " + instructionLabel(phase, i, *prepared[i].spec));
    if (profiling_) {
      CLEAVE_RETURN_IF_ERROR(backend_.synchronize());
      seconds_[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  return backend_.synchronize();
}

} // namespace cleave::runtime

namespace cleave::runtime {

Status Executor::persistent(bool state, const std::string &name, size_t bytes, void **ptr) const {
  const char *what = state ? "state" : "weight";
  size_t size = 0;
  if (state) {
    const BufferSpec *found = nullptr;
    for (const BufferSpec &b : program_.buffers)
      if (b.state && *b.state == name)
        found = &b;
    if (!found)
      return CLEAVE_ERROR(program_.file, ": no state '", name, "'");
    *ptr = static_cast<char *>(state_) + *found->stateOffset;
    size = found->desc.bytes();
  } else {
    auto slot = program_.weightSlots.find(name);
    if (slot == program_.weightSlots.end())
      return CLEAVE_ERROR(program_.weightsFile, ": no weight '", name, "'");
    *ptr = static_cast<char *>(weights_) + slot->second.offset;
    size = slot->second.bytes; // a ZeRO part's, when the program holds one
  }
  if (size != bytes)
    return CLEAVE_ERROR(what, " '", name, "' has ", size, " bytes, not ", bytes);
  return {};
}

Status Executor::readWeight(const std::string &name, void *data, size_t bytes) const {
  void *ptr = nullptr;
  CLEAVE_RETURN_IF_ERROR(persistent(false, name, bytes, &ptr));
  return backend_.copyToHost(data, ptr, bytes);
}

Status Executor::writeWeight(const std::string &name, const void *data, size_t bytes) {
  void *ptr = nullptr;
  CLEAVE_RETURN_IF_ERROR(persistent(false, name, bytes, &ptr));
  return backend_.copyToDevice(ptr, data, bytes);
}

Status Executor::readState(const std::string &name, void *data, size_t bytes) const {
  void *ptr = nullptr;
  CLEAVE_RETURN_IF_ERROR(persistent(true, name, bytes, &ptr));
  return backend_.copyToHost(data, ptr, bytes);
}

Status Executor::writeState(const std::string &name, const void *data, size_t bytes) {
  void *ptr = nullptr;
  CLEAVE_RETURN_IF_ERROR(persistent(true, name, bytes, &ptr));
  return backend_.copyToDevice(ptr, data, bytes);
}

Status Executor::readStateRegion(void *data) const {
  return program_.stateBytes ? backend_.copyToHost(data, state_, program_.stateBytes) : Status();
}

Status Executor::writeStateRegion(const void *data) {
  return program_.stateBytes ? backend_.copyToDevice(state_, data, program_.stateBytes) : Status();
}

} // namespace cleave::runtime
