#include "engine/training_checkpoint.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <set>
#include <utility>

#include "core/checksum.h"
#include "core/crash_point.h"
#include "core/file.h"
#include "embedding/stored_rows.h"

namespace ember::engine {
namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'D', 'N', 'S'};
// Version 2 added the data position; version 1 files (without it) restore
// with an empty one. Version 3 hashes with xxh64 (before: fnv1a64-words,
// core/checksum.h); a version 2 reader would take its hash for damage.
constexpr uint32_t kVersion = 3;
constexpr char kDensePrefix[] = "dense-";
constexpr char kDenseSuffix[] = ".bin";

// Writes pieces to an AtomicFileWriter and hashes them.
class HashingWriter {
 public:
  explicit HashingWriter(AtomicFileWriter& out) : out_(out) {}
  Status Write(const void* data, size_t size) {
    hash_.Update(static_cast<const char*>(data), size);
    return out_.Write(std::string_view(static_cast<const char*>(data), size));
  }
  template <typename T>
  Status Put(T value) {
    return Write(&value, sizeof(value));
  }
  Status PutTensor(const Tensor& t) {
    const int64_t n = t.defined() ? t.numel() : 0;
    EMBER_RETURN_IF_ERROR(Put(n));
    return n > 0 ? Write(t.data<float>(), n * sizeof(float)) : Status::OK();
  }
  uint64_t Digest() const { return hash_.Digest(); }

 private:
  AtomicFileWriter& out_;
  XxHash64Stream hash_;  // kVersion's checksum.
};

// Reads a dense file's bytes front to back; every read is bounds-checked.
class Cursor {
 public:
  Cursor(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  Status Read(void* out, size_t size, const char* what) {
    if (bytes_.size() - pos_ < size) {
      return Status::DataLoss(path_, ": truncated at byte ", pos_, " (reading ", what, ")");
    }
    std::memcpy(out, bytes_.data() + pos_, size);
    pos_ += size;
    return Status::OK();
  }
  Status Skip(size_t size, const char* what) {
    if (bytes_.size() - pos_ < size) {
      return Status::DataLoss(path_, ": truncated at byte ", pos_, " (reading ", what, ")");
    }
    pos_ += size;
    return Status::OK();
  }
  template <typename T>
  Status Get(T* value, const char* what) {
    return Read(value, sizeof(T), what);
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

// The step of a "dense-<20 digits>.bin" name, or -1 for any other name.
int64_t DenseFileStep(const std::string& name) {
  const size_t prefix = sizeof(kDensePrefix) - 1;
  const size_t suffix = sizeof(kDenseSuffix) - 1;
  if (name.size() != prefix + 20 + suffix || name.compare(0, prefix, kDensePrefix) != 0 ||
      name.compare(prefix + 20, suffix, kDenseSuffix) != 0) {
    return -1;
  }
  int64_t step = 0;
  for (size_t i = prefix; i < prefix + 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

}  // namespace

std::string DenseStateDescriptor(const std::string& model_name, const std::string& optimizer,
                                 const std::vector<Parameter*>& parameters) {
  std::string descriptor = model_name + " " + optimizer;
  for (const Parameter* p : parameters) {
    descriptor += ' ';
    const auto& shape = p->value.shape();
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) descriptor += 'x';
      descriptor += std::to_string(shape[i]);
    }
  }
  return descriptor;
}

TrainingCheckpointer::TrainingCheckpointer(embedding::EmbeddingTable& table,
                                           TrainingCheckpointOptions options)
    : options_(std::move(options)),
      table_(table),
      embedding_(table, [&] {
        embedding::CheckpointOptions e;
        e.dir = options_.dir + "/embedding";
        e.optimizer = options_.sparse_optimizer;
        e.keep_full_snapshots = options_.keep_full_snapshots;
        return e;
      }()) {}

Result<std::unique_ptr<TrainingCheckpointer>> TrainingCheckpointer::Create(
    embedding::EmbeddingTable& table, TrainingCheckpointOptions options) {
  if (options.dir.empty()) return Status::InvalidArgument("the checkpoint directory is empty");
  if (options.full_every < 1) {
    return Status::InvalidArgument("full_every must be >= 1, got ", options.full_every);
  }
  if (options.keep_full_snapshots < 1) {
    return Status::InvalidArgument("keep_full_snapshots must be >= 1, got ",
                                   options.keep_full_snapshots);
  }
  if (!table.stored_rows().tracks_changes()) {
    return Status::InvalidArgument(
        "the embedding table does not track changes (needed for delta checkpoints)");
  }
  EMBER_RETURN_IF_ERROR(MakeDirectories(options.dir + "/embedding"));
  return std::unique_ptr<TrainingCheckpointer>(
      new TrainingCheckpointer(table, std::move(options)));
}

std::string TrainingCheckpointer::DensePath(int64_t step) const {
  char name[48];
  std::snprintf(name, sizeof(name), "%s%020" PRId64 "%s", kDensePrefix, step, kDenseSuffix);
  return options_.dir + "/" + name;
}

Result<int64_t> TrainingCheckpointer::NewestStep() const {
  Result<std::vector<int64_t>> steps = embedding::SnapshotSteps(options_.dir + "/embedding");
  if (!steps.ok()) {
    if (steps.status().code() == StatusCode::kNotFound) return int64_t{-1};
    return steps.status();
  }
  return steps->empty() ? int64_t{-1} : steps->back();
}

Status TrainingCheckpointer::Save(int64_t step, const DenseState& dense) {
  {
    const std::string path = DensePath(step);
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Create(path));
    HashingWriter out(*file);
    EMBER_RETURN_IF_ERROR(out.Write(kMagic, sizeof(kMagic)));
    EMBER_RETURN_IF_ERROR(out.Put(kVersion));
    EMBER_RETURN_IF_ERROR(out.Put(uint32_t{0}));
    EMBER_RETURN_IF_ERROR(out.Put(step));
    EMBER_RETURN_IF_ERROR(out.Put(*dense.optimizer_steps));
    EMBER_RETURN_IF_ERROR(out.Put(static_cast<uint32_t>(dense.descriptor.size())));
    EMBER_RETURN_IF_ERROR(out.Write(dense.descriptor.data(), dense.descriptor.size()));
    EMBER_RETURN_IF_ERROR(out.Put(static_cast<uint32_t>(dense.parameters.size())));
    for (const Parameter* p : dense.parameters) {
      EMBER_RETURN_IF_ERROR(out.PutTensor(p->value));
      EMBER_RETURN_IF_ERROR(out.PutTensor(p->slot.first_moment));
      EMBER_RETURN_IF_ERROR(out.PutTensor(p->slot.second_moment));
    }
    std::string admission;
    EMBER_RETURN_IF_ERROR(table_.stored_rows().SaveAdmissionState(&admission));
    EMBER_RETURN_IF_ERROR(out.Put(static_cast<uint64_t>(admission.size())));
    EMBER_RETURN_IF_ERROR(out.Write(admission.data(), admission.size()));
    const std::string& position = dense.data_position ? *dense.data_position : std::string();
    EMBER_RETURN_IF_ERROR(out.Put(static_cast<uint64_t>(position.size())));
    EMBER_RETURN_IF_ERROR(out.Write(position.data(), position.size()));
    const uint64_t digest = out.Digest();
    EMBER_RETURN_IF_ERROR(file->Write(std::string_view(reinterpret_cast<const char*>(&digest),
                                                       sizeof(digest))));
    EMBER_RETURN_IF_ERROR(file->Commit().WithContext("writing the dense checkpoint"));
  }
  CrashPoint("checkpoint.dense_written");
  if (options_.after_dense_write) EMBER_RETURN_IF_ERROR(options_.after_dense_write());
  const bool full = saves_ % options_.full_every == 0;
  EMBER_RETURN_IF_ERROR((full ? embedding_.SaveFull(step) : embedding_.SaveDelta(step))
                            .WithContext("writing the embedding checkpoint"));
  ++saves_;
  return RemoveUnreferencedDenseFiles();
}

Status TrainingCheckpointer::RemoveUnreferencedDenseFiles() {
  EMBER_ASSIGN_OR_RETURN(std::vector<embedding::SnapshotInfo> snapshots,
                         embedding::ListCheckpoints(options_.dir + "/embedding"));
  std::set<int64_t> kept;
  for (const auto& s : snapshots) kept.insert(s.step);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = DenseFileStep(name);
    // Also the temporary files of dense writes a crash interrupted
    // ("dense-<step>.bin.tmp.<pid>.<n>"): no write is in progress now.
    const bool temporary = name.starts_with(kDensePrefix) && name.find(".tmp.") != std::string::npos;
    if ((step >= 0 && kept.count(step) == 0) || temporary) std::filesystem::remove(entry.path(), ec);
  }
  if (ec) return Status::IOError("cannot list or clean ", options_.dir, ": ", ec.message());
  return Status::OK();
}

Result<int64_t> TrainingCheckpointer::Restore(const DenseState& dense) {
  Result<std::vector<int64_t>> steps = embedding::SnapshotSteps(options_.dir + "/embedding");
  if (!steps.ok() && steps.status().code() != StatusCode::kNotFound) return steps.status();
  if (!steps.ok() || steps->empty()) return Status::NotFound("no checkpoint in ", options_.dir);
  // Newest first; a damaged one (DataLoss) gives way to the one before it.
  Status newest_error;
  for (auto it = steps->rbegin(); it != steps->rend(); ++it) {
    Result<int64_t> restored = RestoreStep(*it, dense);
    if (restored.ok()) {
      if (it != steps->rbegin()) {
        LOG(WARNING) << "restored the checkpoint of step " << *it << " instead of the newest, of "
                     << steps->back() << ": " << newest_error;
        EMBER_RETURN_IF_ERROR(embedding_.SetAsideSnapshotsAfter(*it));
      }
      return restored;
    }
    if (restored.status().code() != StatusCode::kDataLoss) return restored.status();
    if (it == steps->rbegin()) {
      newest_error = restored.status();
    } else {
      LOG(WARNING) << "the checkpoint of step " << *it << " is damaged too: " << restored.status();
    }
  }
  return newest_error.WithContext("no checkpoint in " + options_.dir + " is undamaged");
}

Status TrainingCheckpointer::SetAsideAfter(int64_t step) {
  Result<std::vector<int64_t>> steps = embedding::SnapshotSteps(options_.dir + "/embedding");
  if (!steps.ok() && steps.status().code() == StatusCode::kNotFound) return Status::OK();
  EMBER_RETURN_IF_ERROR(steps.status());
  if (steps->empty() || steps->back() <= step) return Status::OK();
  return embedding_.SetAsideSnapshotsAfter(step);
}

Result<int64_t> TrainingCheckpointer::RestoreAt(int64_t step, const DenseState& dense) {
  Result<std::vector<int64_t>> steps = embedding::SnapshotSteps(options_.dir + "/embedding");
  if (!steps.ok() && steps.status().code() != StatusCode::kNotFound) return steps.status();
  if (!steps.ok() || std::find(steps->begin(), steps->end(), step) == steps->end()) {
    return Status::NotFound("no checkpoint of step ", step, " in ", options_.dir);
  }
  EMBER_ASSIGN_OR_RETURN(const int64_t restored, RestoreStep(step, dense));
  EMBER_RETURN_IF_ERROR(SetAsideAfter(step));
  return restored;
}

Result<int64_t> TrainingCheckpointer::RestoreStep(int64_t step, const DenseState& dense) {
  const std::string path = DensePath(step);
  Result<std::string> read = ReadFile(path);
  if (!read.ok()) {
    return Status::DataLoss("the checkpoint of step ", step, " has no readable dense state (",
                            read.status().message(), ")");
  }
  const std::string& bytes = *read;
  if (bytes.size() < sizeof(kMagic) + sizeof(uint32_t) + sizeof(uint64_t)) {
    return Status::DataLoss(path, ": too short");
  }
  Cursor in(bytes, path);
  char magic[sizeof(kMagic)];
  uint32_t version = 0, reserved = 0, descriptor_size = 0, count = 0;
  int64_t file_step = 0, optimizer_steps = 0;
  EMBER_RETURN_IF_ERROR(in.Read(magic, sizeof(magic), "the magic"));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return Status::DataLoss(path, ": not an Ember dense checkpoint");
  }
  EMBER_RETURN_IF_ERROR(in.Get(&version, "the version"));
  if (version < 1 || version > kVersion) {
    return Status::DataLoss(path, ": unknown version ", version);
  }
  // The hash covers every byte before it, the version too: a damaged
  // version names another checksum, which then fails as well.
  const FileChecksum checksum = version >= 3 ? FileChecksum::kXxh64 : FileChecksum::kFnv1a64Words;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof(uint64_t), sizeof(stored));
  if (FileChecksumOf(checksum, bytes.data(), bytes.size() - sizeof(uint64_t)) != stored) {
    return Status::DataLoss(path, ": hash mismatch (damaged file)");
  }
  EMBER_RETURN_IF_ERROR(in.Get(&reserved, "the header"));
  EMBER_RETURN_IF_ERROR(in.Get(&file_step, "the step"));
  if (file_step != step) {
    return Status::DataLoss(path, ": holds step ", file_step, ", its name says ", step);
  }
  EMBER_RETURN_IF_ERROR(in.Get(&optimizer_steps, "the optimizer steps"));
  EMBER_RETURN_IF_ERROR(in.Get(&descriptor_size, "the descriptor"));
  std::string descriptor(descriptor_size, '\0');
  EMBER_RETURN_IF_ERROR(in.Read(descriptor.data(), descriptor_size, "the descriptor"));
  if (descriptor != dense.descriptor) {
    return Status::InvalidArgument("the checkpoint in ", options_.dir, " is of another model (",
                                   descriptor, "), this job trains ", dense.descriptor);
  }
  EMBER_RETURN_IF_ERROR(in.Get(&count, "the parameter count"));
  if (count != dense.parameters.size()) {
    return Status::DataLoss(path, ": ", count, " parameters, the descriptor has ",
                            dense.parameters.size());
  }
  // Check every tensor's size before changing anything.
  struct Piece {
    Tensor* target;
    size_t offset;
  };
  std::vector<Piece> pieces;
  for (Parameter* p : dense.parameters) {
    for (Tensor* t : {&p->value, &p->slot.first_moment, &p->slot.second_moment}) {
      int64_t n = 0;
      EMBER_RETURN_IF_ERROR(in.Get(&n, "a tensor size"));
      const int64_t expected = t->defined() ? t->numel() : 0;
      if (n != expected) {
        return Status::DataLoss(path, ": a tensor of ", n, " floats where ", expected,
                                " were expected, at byte ", in.pos());
      }
      pieces.push_back({t, in.pos()});
      EMBER_RETURN_IF_ERROR(in.Skip(static_cast<size_t>(n) * sizeof(float), "a tensor"));
    }
  }
  uint64_t admission_size = 0;
  EMBER_RETURN_IF_ERROR(in.Get(&admission_size, "the admission state size"));
  const size_t admission_offset = in.pos();
  EMBER_RETURN_IF_ERROR(in.Skip(admission_size, "the admission state"));
  uint64_t position_size = 0;
  size_t position_offset = in.pos();
  if (version >= 2) {
    EMBER_RETURN_IF_ERROR(in.Get(&position_size, "the data position size"));
    position_offset = in.pos();
    EMBER_RETURN_IF_ERROR(in.Skip(position_size, "the data position"));
  }
  if (in.pos() != bytes.size() - sizeof(uint64_t)) {
    return Status::DataLoss(path, ": ", bytes.size() - sizeof(uint64_t) - in.pos(),
                            " unexpected bytes after the parameters");
  }
  Result<int64_t> embedding_step = embedding_.RestoreAt(step);
  if (!embedding_step.ok()) {
    return embedding_step.status().WithContext("restoring the embedding table");
  }
  if (*embedding_step != step) {
    return Status::DataLoss("the embedding snapshot restored is of step ", *embedding_step,
                            ", expected ", step);
  }
  EMBER_RETURN_IF_ERROR(
      table_.stored_rows()
          .RestoreAdmissionState(std::string_view(bytes).substr(admission_offset, admission_size))
          .WithContext(path));
  for (const Piece& piece : pieces) {
    if (piece.target->defined() && piece.target->numel() > 0) {
      std::memcpy(piece.target->data<float>(), bytes.data() + piece.offset, piece.target->nbytes());
    }
  }
  *dense.optimizer_steps = optimizer_steps;
  if (dense.data_position != nullptr) {
    dense.data_position->assign(bytes, position_offset, position_size);
  }
  // The next save continues the chain the restore read: a delta unless a
  // full snapshot is due.
  saves_ = 1;
  return step;
}

}  // namespace ember::engine
