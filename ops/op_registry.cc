#include "ops/op_registry.h"

#include <cmath>
#include <cstring>
#include <mutex>

#include "ops/dense_ops.h"

namespace ember::ops {

double OpAttrs::Get(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t OpAttrs::GetInt(const std::string& name, int64_t fallback) const {
  return static_cast<int64_t>(std::llround(Get(name, static_cast<double>(fallback))));
}

Status OpRegistry::RegisterOp(OpDef op) {
  if (ops_.count(op.name)) return Status::AlreadyExists("op ", op.name, " is already registered");
  if (op.saved_outputs < 0) {
    return Status::InvalidArgument("op ", op.name, ": saved_outputs is ", op.saved_outputs);
  }
  const std::string name = op.name;
  ops_.emplace(name, std::move(op));
  return Status::OK();
}

Status OpRegistry::RegisterKernel(const std::string& op, DeviceType device, KernelPair kernels) {
  if (!ops_.count(op)) return Status::NotFound("no op ", op, " to register a kernel for");
  if (!kernels_.emplace(std::pair{op, device}, std::move(kernels)).second) {
    return Status::AlreadyExists("op ", op, " already has a ", Device{device, 0}.ToString(),
                                 " kernel");
  }
  return Status::OK();
}

Result<const OpDef*> OpRegistry::FindOp(const std::string& op) const {
  auto it = ops_.find(op);
  if (it == ops_.end()) return Status::NotFound("no operator named \"", op, "\"");
  return &it->second;
}

Result<const KernelPair*> OpRegistry::FindKernel(const std::string& op, DeviceType device) const {
  auto it = kernels_.find({op, device});
  if (it == kernels_.end()) {
    return Status::NotFound("operator \"", op, "\" has no ", Device{device, 0}.ToString(),
                            " kernel");
  }
  return &it->second;
}

bool OpRegistry::HasKernel(const std::string& op, DeviceType device) const {
  return kernels_.count({op, device}) > 0;
}

std::vector<std::string> OpRegistry::OpNames() const {
  std::vector<std::string> names;
  for (const auto& [name, op] : ops_) names.push_back(name);
  return names;
}

const OpRegistry& DefaultOpRegistry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    const Status status = RegisterCpuOps(r);
    CHECK(status.ok()) << "registering the CPU operators: " << status;
    const Status cuda = RegisterCudaOps(r);
    CHECK(cuda.ok()) << "registering the CUDA kernels: " << cuda;
    return r;
  }();
  return *registry;
}

}  // namespace ember::ops
