#include "tools/train_data.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>

#include "core/json.h"
#include "core/progress.h"
#include "engine/model_zoo.h"
#include "engine/train_options.h"
#include "io/batch.h"
#include "io/columnar.h"
#include "io/criteo.h"
#include "io/rank_shard_source.h"
#include "io/synthetic.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/model_flags.h"
#include "tools/train_flags.h"

namespace ember::tools {
namespace {

// The shape of examples, to compare training and test data.
struct Shape {
  int num_labels = 0;
  int num_dense = 0;
  int num_slots = 0;
  int slot_bits = 0;
};

// Generates --rows examples into `dir` and reads them: Criteo TSV for
// Criteo's shape (13 dense, 26 single-valued slots), columnar otherwise.
Result<InputData> GenerateData(const std::string& dir, const io::TextReadOptions& read,
                               std::vector<double>* bayes_auc) {
  EMBER_ASSIGN_OR_RETURN(io::SyntheticOptions synthetic, SyntheticOptionsFromFlags());
  if (FLAGS_tasks == 0) synthetic.num_tasks = engine::DefaultTaskCount(ModelFlag());
  const bool criteo_shape = synthetic.num_dense == io::kCriteoDense &&
                            synthetic.num_slots == io::kCriteoSlots &&
                            synthetic.multi_hot_slots == 0 && synthetic.num_tasks == 1;
  synthetic.format = criteo_shape ? io::SyntheticFormat::kCriteo : io::SyntheticFormat::kColumnar;
  const std::string path = dir + (criteo_shape ? "/generated.tsv" : "/generated.col");
  LOG(INFO) << "no --train_data: generating " << synthetic.rows
            << " examples from a planted model (seed " << synthetic.seed << ")";
  if (FLAGS_format != "auto") {
    LOG(WARNING) << "--format=" << FLAGS_format << " applies to --train_data and --test_data; "
                 << "the generated data is read as "
                 << io::SyntheticFormatName(synthetic.format);
  }
  ProgressReporter progress("gen-data rows", synthetic.rows);
  EMBER_ASSIGN_OR_RETURN(
      io::SyntheticInfo info,
      io::WriteSynthetic(path, synthetic, [&](int64_t rows) { progress.Update(rows); }));
  progress.Finish();
  *bayes_auc = info.task_bayes_auc;
  InputData input;
  input.format = io::SyntheticFormatName(synthetic.format);
  input.slot_bits = synthetic.slot_bits;
  if (criteo_shape) {
    EMBER_ASSIGN_OR_RETURN(auto format, io::NewCriteoFormat(synthetic.slot_bits));
    EMBER_ASSIGN_OR_RETURN(input.data, io::ReadTextFiles({path}, *format, read));
  } else {
    EMBER_ASSIGN_OR_RETURN(input.data, io::ReadColumnarDataset(path));
    if (read.keep_every > 1) {
      // A rank's share of generated columnar data: read whole, then cut.
      io::Batch share;
      share.Clear(input.data.num_dense(), input.data.num_slots(), input.data.num_labels());
      io::AppendEveryNth(input.data.all(), 0, read.keep_every, read.keep_offset, &share);
      input.data = io::Dataset(std::move(share));
    }
  }
  return input;
}

// Makes `data` hold this rank's share of the training examples of `share`
// (every comm.size()-th example of the whole data, from comm.rank()): with
// `held_out`, the last --test_fraction of the whole data (which every rank
// evaluates) is gathered from every rank's share into data->test instead.
// A collective over `comm`.
Status KeepShare(Communicator& comm, bool held_out, io::Dataset* share, Data* data) {
  const int64_t n = comm.size(), r = comm.rank();
  std::vector<int64_t> total = {share->size()};
  EMBER_RETURN_IF_ERROR(comm.AllReduce(total, total));
  const int64_t examples = total[0];
  int64_t train_rows = examples;
  if (held_out) {
    const int64_t test_rows = static_cast<int64_t>(std::llround(examples * FLAGS_test_fraction));
    train_rows = examples - test_rows;
    if (train_rows < 1 || test_rows < 1) {
      return Status::InvalidArgument("--train_data holds ", examples,
                                     " examples: too few to hold out --test_fraction=",
                                     FLAGS_test_fraction);
    }
  }
  // This rank's examples r, r + n, ...: those below train_rows train.
  const int64_t mine = std::max<int64_t>(0, (train_rows - r + n - 1) / n);
  const io::ExampleShape shape{share->num_dense(), share->num_slots(), share->num_labels()};
  if (held_out) {
    std::vector<int64_t> test_indices;
    for (int64_t j = mine; j < share->size(); ++j) test_indices.push_back(r + j * n);
    EMBER_ASSIGN_OR_RETURN(data->test,
                           io::AllGatherExamples(comm, share->Slice(mine, share->size()),
                                                 test_indices, shape));
  }
  data->train = mine == share->size() ? std::move(*share) : share->Slice(0, mine);
  *share = io::Dataset();
  data->train_is_share = true;
  data->train_examples = train_rows;
  data->train_indices.resize(mine);
  for (int64_t j = 0; j < mine; ++j) data->train_indices[j] = r + j * n;
  return Status::OK();
}

Status CheckSameShape(const Shape& a, const Shape& b) {
  if (a.num_dense != b.num_dense || a.num_slots != b.num_slots ||
      a.num_labels != b.num_labels) {
    return Status::InvalidArgument(
        "--test_data has ", b.num_labels, " labels, ", b.num_dense, " dense features and ",
        b.num_slots, " slots per example, --train_data ", a.num_labels, ", ", a.num_dense,
        " and ", a.num_slots);
  }
  if (a.slot_bits != b.slot_bits) {
    return Status::InvalidArgument("--test_data keys use ", b.slot_bits,
                                   " slot bits, --train_data keys ", a.slot_bits,
                                   " (see --slot_bits)");
  }
  return Status::OK();
}

Shape ShapeOf(const io::Dataset& data, int slot_bits) {
  return Shape{data.num_labels(), data.num_dense(), data.num_slots(), slot_bits};
}

Shape ShapeOf(const io::StreamReader& reader, int slot_bits) {
  return Shape{reader.num_labels(), reader.num_dense(), reader.num_slots(), slot_bits};
}

// Whether --reader asks to stream the training data.
Result<bool> StreamTrainingData(bool have_test_data) {
  if (FLAGS_reader == "memory") return false;
  if (FLAGS_reader == "stream") {
    if (!have_test_data) {
      return Status::InvalidArgument(
          "--reader=stream needs --test_data: a streamed training set cannot hold out its "
          "last --test_fraction (give --test_data, or use --reader=memory)");
    }
    return true;
  }
  if (FLAGS_reader == "auto") return have_test_data;
  return Status::InvalidArgument("--reader=", FLAGS_reader,
                                 " is not known; use auto, memory or stream");
}

// --piece_kib in bytes, or for 0 the default: 1 MiB, less for small input so
// that each shard has at least 8 pieces (no less than 16 KiB). A function of
// the input's size: the same input gets the same pieces, hence the same order.
int64_t PieceBytes(const std::vector<std::string>& paths, int shards) {
  if (FLAGS_piece_kib > 0) return FLAGS_piece_kib << 10;
  const int64_t per_piece = TotalFileBytes(paths) / (8 * int64_t{shards});
  return std::clamp<int64_t>(per_piece, int64_t{16} << 10, int64_t{1} << 20);
}

int ReaderThreads(int threads) {
  if (FLAGS_reader_threads > 0) return FLAGS_reader_threads;
  return std::max(1, threads / 4);
}

// Makes `options` read shard `shard` of `paths`, in pieces of the size a job
// of that many shards reads (the pieces decide the order, so a resume on
// another number of ranks opens the old shards with the old size).
void SetShard(const std::vector<std::string>& paths, Shard shard,
              io::StreamReaderOptions* options) {
  options->num_shards = shard.count;
  options->shard_index = shard.index;
  options->piece_bytes = PieceBytes(paths, shard.count);
  // Columnar: 4096 rows for 1 MiB, the StreamReader's default.
  options->piece_rows = std::max<int64_t>(1, options->piece_bytes / 256);
}

// Streams --train_data (shard `shard` of it) in the batches and epochs of
// `batching`, and --test_data.
Status OpenStreams(const std::vector<std::string>& train_paths,
                   const std::vector<std::string>& test_paths,
                   const engine::TrainOptions& batching, int threads, Shard shard, Data* data) {
  if (shard.index >= shard.count) {
    return Status::InvalidArgument("--shard_index=", shard.index,
                                   " must be below --num_shards=", shard.count);
  }
  io::StreamReaderOptions options;
  options.batch_size = batching.batch_size;
  options.num_epochs = batching.epochs;
  options.seed = batching.seed;
  options.shuffle_files = batching.shuffle;
  options.shuffle_pieces = batching.shuffle;
  options.shuffle_buffer = batching.shuffle ? FLAGS_shuffle_buffer : 0;
  options.threads = ReaderThreads(threads);
  SetShard(train_paths, shard, &options);
  Result<InputStream> train = OpenInputStream(train_paths, options);
  if (!train.ok()) return train.status().WithContext("--train_data");
  const Shape train_shape = ShapeOf(*train->reader, train->slot_bits);

  io::StreamReaderOptions test_options;
  test_options.batch_size = engine::TrainOptions().eval_batch_size;
  test_options.threads = options.threads;
  Result<InputStream> test = OpenInputStream(test_paths, test_options);
  if (!test.ok()) return test.status().WithContext("--test_data");
  EMBER_RETURN_IF_ERROR(CheckSameShape(train_shape, ShapeOf(*test->reader, test->slot_bits)));

  data->train_source = Source{train->format, train->slot_bits, {}, {}};
  data->test_source = Source{test->format, test->slot_bits, {}, {}};
  data->num_labels = train_shape.num_labels;
  data->num_dense = train_shape.num_dense;
  data->num_slots = train_shape.num_slots;
  LOG(INFO) << "data: streaming --train_data (" << train_paths.size() << " files, "
            << train->reader->num_pieces() << " pieces, about "
            << train->reader->EpochLines(0) << " examples per epoch in this shard, "
            << options.threads << " parser threads) and --test_data (" << test_paths.size()
            << " files), " << train_shape.num_dense << " dense features, "
            << train_shape.num_slots << " slots";
  data->train_stream = std::move(train->reader);
  // Shard i of n of the same files, as a job of n ranks reads them.
  io::StreamShardOpener open_shard = [train_paths, options](int index, int count) mutable
      -> Result<std::unique_ptr<io::StreamReader>> {
    SetShard(train_paths, Shard{count, index}, &options);
    EMBER_ASSIGN_OR_RETURN(InputStream stream, OpenInputStream(train_paths, options));
    return std::move(stream.reader);
  };
  data->train_elastic = std::make_unique<io::ElasticStreamSource>(
      data->train_stream.get(), std::move(open_shard), shard.index, shard.count);
  data->test_stream = std::move(test->reader);
  data->test_paths = test_paths;
  data->test_options = test_options;
  // The stream reads the test files only when evaluating, after training:
  // read a first batch of them now, so that a file that is not readable,
  // not in the format or without labels fails before the first step.
  Result<InputStream> probe = OpenInputStream(test_paths, test_options);
  if (!probe.ok()) return probe.status().WithContext("--test_data");
  io::Batch batch;
  Result<bool> more = probe->reader->Next(&batch);
  if (!more.ok()) return more.status().WithContext("--test_data");
  if (!*more) return Status::InvalidArgument("--test_data: the test data has no examples");
  return Status::OK();
}

}  // namespace

Result<Data> LoadData(TempDir* temp_dir, const engine::TrainOptions& batching, int threads,
                      Shard shard, bool several_ranks) {
  EMBER_ASSIGN_OR_RETURN(const io::TextReadOptions read, TextReadOptionsFromFlags());
  Data data;
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> train_paths,
                         ExpandPathList("train_data", FLAGS_train_data));
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> test_paths,
                         ExpandPathList("test_data", FLAGS_test_data));
  if (!train_paths.empty()) {
    Result<std::vector<double>> bayes = io::ReadSyntheticTaskBayesAuc(train_paths.front());
    if (bayes.ok()) data.ceiling_auc = *bayes;
  }
  EMBER_ASSIGN_OR_RETURN(const bool stream,
                         StreamTrainingData(!train_paths.empty() && !test_paths.empty()));
  if (stream) {
    EMBER_RETURN_IF_ERROR(OpenStreams(train_paths, test_paths, batching, threads, shard, &data));
    return data;
  }
  if (FLAGS_num_shards > 1 && !several_ranks) {
    return Status::InvalidArgument("--num_shards needs --reader=stream (and --test_data)");
  }
  // Several ranks: each keeps its share of the training examples.
  Communicator* const comm = batching.ranks.data;
  const bool share = several_ranks && FLAGS_shard_in_memory_data && comm != nullptr;
  io::TextReadOptions read_train = read;
  if (share) {
    read_train.keep_every = comm->size();
    read_train.keep_offset = comm->rank();
  }
  InputData train;
  if (train_paths.empty()) {
    EMBER_ASSIGN_OR_RETURN(std::string dir, temp_dir->Create("ember-train"));
    EMBER_ASSIGN_OR_RETURN(train, GenerateData(dir, read_train, &data.ceiling_auc));
  } else {
    Result<InputData> input = ReadInput(train_paths, read_train);
    if (!input.ok()) return input.status().WithContext("--train_data");
    train = *std::move(input);
  }
  data.train_source = Source{train.format, train.slot_bits, train.data.bad_lines(), {}};
  const Shape train_shape = ShapeOf(train.data, train.slot_bits);
  if (share) {
    EMBER_RETURN_IF_ERROR(KeepShare(*comm, test_paths.empty(), &train.data, &data));
  }
  if (!test_paths.empty()) {
    Result<InputData> test = ReadInput(test_paths, read);
    if (!test.ok()) return test.status().WithContext("--test_data");
    EMBER_RETURN_IF_ERROR(CheckSameShape(train_shape, ShapeOf(test->data, test->slot_bits)));
    data.test_source = Source{test->format, test->slot_bits, test->data.bad_lines(), {}};
    data.test = std::move(test->data);
    if (!share) data.train = std::move(train.data);
  } else if (!share) {
    const io::Dataset& all = train.data;
    const int64_t test_rows = static_cast<int64_t>(std::llround(all.size() * FLAGS_test_fraction));
    const int64_t train_rows = all.size() - test_rows;
    if (train_rows < 1 || test_rows < 1) {
      return Status::InvalidArgument("--train_data holds ", all.size(),
                                     " examples: too few to hold out --test_fraction=",
                                     FLAGS_test_fraction);
    }
    data.test = all.Slice(train_rows, all.size());
    data.train = all.Slice(0, train_rows);
  }
  if (data.test.size() == 0) return Status::InvalidArgument("the test data has no examples");
  data.num_labels = data.train.num_labels();
  data.num_dense = data.train.num_dense();
  data.num_slots = data.train.num_slots();
  LOG(INFO) << "data: " << (share ? data.train_examples : data.train.size()) << " training and "
            << data.test.size() << " test examples, " << data.num_dense << " dense features, "
            << data.num_slots << " slots";
  if (share) {
    LOG(INFO) << "data: rank " << comm->rank() << " of " << comm->size() << " holds "
              << data.train.size() << " of the " << data.train_examples
              << " training examples (its share; --shard_in_memory_data)";
  }
  return data;
}

std::string SourceSummary(const Source& source) {
  std::string summary =
      source.format == "columnar" ? "columnar (lines were checked when it was written)"
                                  : source.format + ", " + io::BadLineTotals(source.bad_lines);
  if (source.stream) {
    const io::StreamStats& s = *source.stream;
    summary += ::ember::internal::StrCat("; streamed ", s.records_delivered, " examples in ",
                                         s.batches_delivered, " batches");
    if (s.padded_for_equal_shards + s.dropped_for_equal_shards > 0) {
      summary += ::ember::internal::StrCat(
          " (equal shards: ", s.padded_for_equal_shards, " repeated, ",
          s.dropped_for_equal_shards, " lines left unread)");
    }
  }
  return summary;
}

Json SourceJson(const Source& source) {
  Json json = {{"format", source.format},
               {"lines_read", source.bad_lines.lines_read},
               {"bad_lines", source.bad_lines.bad_lines}};
  if (source.stream) {
    json["streamed_examples"] = source.stream->records_delivered;
    json["padded_for_equal_shards"] = source.stream->padded_for_equal_shards;
    json["dropped_for_equal_shards"] = source.stream->dropped_for_equal_shards;
  }
  Json by_reason = Json::object();
  for (const auto& [reason, count] : source.bad_lines.by_reason) by_reason[reason] = count;
  json["bad_lines_by_reason"] = std::move(by_reason);
  return json;
}

}  // namespace ember::tools
