//===- train_baseline.cpp - LibTorch's training step, the baseline --------===//
//
// The LibTorch side of bench/cpu_train.py: trains the same TorchScript file
// that `cleave compile --mode train` compiles, on the same data file, the way
// `cleave train` does, and prints one JSON object.
//
//   cleave-train-baseline MODEL.pt --data DATA.safetensors --steps N
//       [--loss model|cross_entropy|mse] [--lr X] [--betas B1,B2] [--eps X]
//       [--weight-decay X] [--threads N] [--report FILE]
//
// A step is what a training loop in LibTorch does: the step's batch (samples
// (i*B + j) mod S of every input, i the step from 0, as `cleave train` takes
// them), forward in train mode, the loss (the model's output with --loss
// model, else F.cross_entropy / F.mse_loss of the output against `labels`,
// as `cleave compile --loss` appends it), backward, torch::optim::AdamW with
// the given hyper-parameters, gradients reset to none before the next step.
// The step time covers all of that, batch gathering included.
//
// The model's inputs (names, order, batch size) come from the file's
// `cleave.json` (examples/export.py writes it). Parameters that are tied
// (one tensor in two modules) are given to the optimizer once.
//
// Output: {"engine", "model", "threads", "batch_size", "parameters",
// "steps": [{"step", "loss", "seconds"}], "losses", "mean_step_seconds"
// (without the first step), "peak_rss_bytes" (getrusage ru_maxrss),
// "rss_after_load_bytes"}.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace rt = cleave::runtime;
using Json = nlohmann::json;

namespace {

constexpr const char *kUsage =
    "usage: cleave-train-baseline MODEL.pt --data DATA.safetensors --steps N\n"
    "           [--loss model|cross_entropy|mse] [--lr X] [--betas B1,B2] [--eps X]\n"
    "           [--weight-decay X] [--threads N] [--report FILE]\n";

[[noreturn]] void die(const std::string &message) {
  std::cerr << "cleave-train-baseline: error: " << message << "\n";
  std::exit(1);
}

struct Options {
  std::string model, data, report;
  std::string loss = "model";
  int64_t steps = 0;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 1e-2;
  int threads = 0;
};

double number(const char *text, const char *flag) {
  char *end = nullptr;
  double v = std::strtod(text, &end);
  if (!*text || *end)
    die(std::string(flag) + " needs a number, got '" + text + "'");
  return v;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--data") {
      o.data = value();
    } else if (arg == "--steps") {
      o.steps = static_cast<int64_t>(number(value(), "--steps"));
    } else if (arg == "--loss") {
      o.loss = value();
      if (o.loss != "model" && o.loss != "cross_entropy" && o.loss != "mse")
        die("--loss must be model, cross_entropy or mse");
    } else if (arg == "--lr") {
      o.lr = number(value(), "--lr");
    } else if (arg == "--betas") {
      std::string v = value();
      size_t comma = v.find(',');
      if (comma == std::string::npos)
        die("--betas needs B1,B2");
      o.beta1 = number(v.substr(0, comma).c_str(), "--betas");
      o.beta2 = number(v.substr(comma + 1).c_str(), "--betas");
    } else if (arg == "--eps") {
      o.eps = number(value(), "--eps");
    } else if (arg == "--weight-decay") {
      o.weightDecay = number(value(), "--weight-decay");
    } else if (arg == "--threads") {
      o.threads = static_cast<int>(number(value(), "--threads"));
    } else if (arg == "--report") {
      o.report = value();
    } else if (!arg.empty() && arg[0] == '-') {
      die("unknown option " + arg + "\n" + kUsage);
    } else if (o.model.empty()) {
      o.model = arg;
    } else {
      die("one model only\n" + std::string(kUsage));
    }
  }
  if (o.model.empty() || o.data.empty() || o.steps < 1)
    die(std::string("MODEL.pt, --data and --steps N >= 1 are required\n") + kUsage);
  return o;
}

at::ScalarType scalarType(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32: return at::kFloat;
  case rt::DType::BF16: return at::kBFloat16;
  case rt::DType::F16: return at::kHalf;
  case rt::DType::I64: return at::kLong;
  case rt::DType::I32: return at::kInt;
  case rt::DType::I1: return at::kBool;
  }
  return at::kFloat;
}

/// Every tensor of a safetensors file, read with the runtime's reader.
std::map<std::string, at::Tensor> readData(const std::string &path) {
  rt::SafetensorsIndex index;
  if (rt::Status s = rt::readSafetensorsIndex(path, &index); !s.ok())
    die(s.message());
  std::map<std::string, at::Tensor> out;
  for (const rt::SafetensorsEntry &entry : index.entries) {
    at::Tensor t = at::empty(entry.desc.shape, at::TensorOptions().dtype(scalarType(entry.desc.dtype)));
    if (rt::Status s = rt::readSafetensorsTensor(index, entry, t.data_ptr()); !s.ok())
      die(s.message());
    out[entry.name] = t;
  }
  return out;
}

int64_t rssNowBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

int64_t peakRssBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  if (o.threads > 0)
    at::set_num_threads(o.threads);

  torch::jit::ExtraFilesMap extra{{"cleave.json", ""}};
  torch::jit::Module module;
  try {
    module = torch::jit::load(o.model, c10::nullopt, extra);
  } catch (const std::exception &e) {
    die(o.model + ": " + e.what());
  }
  if (extra["cleave.json"].empty())
    die(o.model + ": no cleave.json (export it with examples/export.py)");
  Json meta = Json::parse(extra["cleave.json"]);
  std::vector<std::string> inputNames;
  for (const Json &input : meta["inputs"])
    inputNames.push_back(input["name"].get<std::string>());
  if (inputNames.empty())
    die(o.model + ": cleave.json lists no inputs");
  int64_t batch = meta["inputs"][0]["shape"][0].get<int64_t>();
  module.train(true);

  // The trainable parameters, each tensor once (tied weights appear in two modules).
  std::vector<at::Tensor> params;
  std::set<const void *> seen;
  int64_t numel = 0;
  for (const at::Tensor &p : module.parameters(/*recurse=*/true)) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second)
      continue;
    p.requires_grad_(true);
    params.push_back(p);
    numel += p.numel();
  }
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(o.lr)
                                            .betas(std::make_tuple(o.beta1, o.beta2))
                                            .eps(o.eps)
                                            .weight_decay(o.weightDecay));

  std::map<std::string, at::Tensor> data = readData(o.data);
  std::vector<std::string> batchNames = inputNames;
  if (o.loss != "model")
    batchNames.push_back("labels");
  int64_t samples = -1;
  for (const std::string &name : batchNames) {
    auto it = data.find(name);
    if (it == data.end())
      die(o.data + ": no tensor '" + name + "'");
    if (samples >= 0 && it->second.size(0) != samples)
      die(o.data + ": '" + name + "' has a different number of samples");
    samples = it->second.size(0);
  }
  int64_t rssAfterLoad = rssNowBytes();

  Json steps = Json::array(), losses = Json::array();
  double total = 0, first = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    at::Tensor index = at::remainder(at::arange(step * batch, (step + 1) * batch, at::kLong), samples);
    std::vector<torch::jit::IValue> inputs;
    for (const std::string &name : inputNames)
      inputs.emplace_back(data[name].index_select(0, index));
    at::Tensor output = module.forward(inputs).toTensor();
    at::Tensor loss;
    if (o.loss == "model") {
      loss = output;
    } else if (o.loss == "cross_entropy") {
      at::Tensor labels = data["labels"].index_select(0, index);
      loss = torch::nn::functional::cross_entropy(output.reshape({-1, output.size(-1)}),
                                                  labels.reshape({-1}));
    } else {
      at::Tensor labels = data["labels"].index_select(0, index);
      loss = torch::nn::functional::mse_loss(output, labels);
    }
    loss.backward();
    optimizer.step();
    for (at::Tensor &p : params)
      p.mutable_grad() = at::Tensor(); // zero_grad(set_to_none=True)
    float value = loss.item<float>();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    steps.push_back(Json{{"step", step + 1}, {"loss", value}, {"seconds", seconds}});
    losses.push_back(value);
    if (step == 0)
      first = seconds;
    total += seconds;
  }
  double mean = o.steps > 1 ? (total - first) / (o.steps - 1) : total;

  Json report{{"engine", "libtorch"},
              {"torch_version", TORCH_VERSION},
              {"model", o.model},
              {"data", o.data},
              {"loss", o.loss},
              {"threads", at::get_num_threads()},
              {"batch_size", batch},
              {"parameters", numel},
              {"steps", steps},
              {"losses", losses},
              {"mean_step_seconds", mean},
              {"rss_after_load_bytes", rssAfterLoad},
              {"peak_rss_bytes", peakRssBytes()}};
  std::string text = report.dump(1) + "\n";
  if (o.report.empty()) {
    std::cout << text;
  } else {
    std::ofstream out(o.report);
    out << text;
    if (!out)
      die(o.report + ": cannot write");
  }
  return 0;
}
