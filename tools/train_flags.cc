// The flags of `ember train`, each with its help and range check; the
// command (train_command.cc), planning (plan_flags.cc) and the data's set-up
// (train_data.cc) read them through tools/train_flags.h.
#include "tools/train_flags.h"

#include <gflags/gflags.h>

#include "tools/flag_validators.h"

DEFINE_string(train_data, "",
              "Files to train on, comma-separated (glob patterns allowed), in --format (text "
              "may be .gz). Empty: generate --rows examples from a planted model (see "
              "gen-data) and train on those.");
DEFINE_string(test_data, "",
              "Files to evaluate on, like --train_data. Empty: hold out the last "
              "--test_fraction of the training data.");
DEFINE_double(test_fraction, 0.2,
              "Fraction of the training data (its last examples) held out for evaluation "
              "when --test_data is empty.");
DEFINE_validator(test_fraction, &ember::tools::IsFraction);
DEFINE_int32(embedding_dim, 16, "Floats per embedding row.");
DEFINE_validator(embedding_dim, &ember::tools::IsPositive32);
DEFINE_string(top_mlp, "512,256",
              "MLP widths before the final logit (dlrm's top MLP, the deep part of the other "
              "models).");
DEFINE_int32(batch_size, 256, "Examples per training step.");
DEFINE_validator(batch_size, &ember::tools::IsPositive32);
DEFINE_int32(epochs, 1, "Passes over the training data.");
DEFINE_validator(epochs, &ember::tools::IsPositive32);
DEFINE_int64(max_steps, 0, "Stop after this many training steps; 0 means no limit.");
DEFINE_validator(max_steps, &ember::tools::IsNonNegative64);
DEFINE_int64(timing_warmup_steps, 3,
             "Training steps at the start left out of the steady-state samples/s (the train "
             "line's 'after the first N steps', train.steady_samples_per_sec in --metrics_out): "
             "they carry one-time costs such as kernel generation. They train like any other.");
DEFINE_validator(timing_warmup_steps, &ember::tools::IsNonNegative64);
DEFINE_string(sparse_optimizer, "adagrad",
              "Embedding optimizer: sgd, adagrad, rowwise_adagrad (one accumulator per row), "
              "adam (lazy: per-row step count) or ftrl (FTRL-Proximal; --sparse_lr is its "
              "alpha).");
DEFINE_double(sparse_lr, 0.05, "Embedding learning rate (FTRL: alpha).");
DEFINE_double(ftrl_beta, 1.0, "FTRL-Proximal beta (learning-rate smoothing).");
DEFINE_validator(ftrl_beta, &ember::tools::IsNonNegativeDouble);
DEFINE_double(ftrl_l1, 0.0, "FTRL-Proximal L1 regularisation; > 0 makes rows sparse.");
DEFINE_validator(ftrl_l1, &ember::tools::IsNonNegativeDouble);
DEFINE_double(ftrl_l2, 0.0, "FTRL-Proximal L2 regularisation.");
DEFINE_validator(ftrl_l2, &ember::tools::IsNonNegativeDouble);
DEFINE_string(admission, "none",
              "Which keys get an embedding row: none (every key on first sight), frequency "
              "(after --admission_min_count pulls, counted in a count-min sketch) or "
              "probability (each pull admits with --admission_probability). A key not yet "
              "admitted reads as zeros and its gradient is dropped.");
DEFINE_int64(admission_min_count, 2, "With --admission=frequency: pulls before a row is made.");
DEFINE_validator(admission_min_count, &ember::tools::IsPositive64);
DEFINE_double(admission_probability, 0.5,
              "With --admission=probability: chance that a pull of a new key admits it.");
DEFINE_validator(admission_probability, &ember::tools::IsRatio);
DEFINE_int64(embedding_ttl_steps, 0,
             "Evict embedding rows not pulled for this many steps; 0 keeps every row.");
DEFINE_validator(embedding_ttl_steps, &ember::tools::IsNonNegative64);
DEFINE_string(embedding_memory_budget, "",
              "Bytes the embedding tables may hold in memory (e.g. 512MB, 8GB), counting "
              "vectors, optimizer state and index; rows beyond it are written back to a "
              "RocksDB tier in --embedding_dir. Empty: everything in memory, no disk tier.");
DEFINE_string(embedding_eviction, "lfu",
              "With --embedding_memory_budget: which rows leave memory first, lfu (least "
              "often pulled, sampled among 8) or lru (least recently pulled). Changes speed, "
              "never values. lfu keeps more of a skewed stream's hot rows: DLRM at a 10% "
              "budget read 24% fewer rows from disk and trained 16-18% faster than with lru.");
DEFINE_string(embedding_weights, "f32",
              "How embedding rows hold their weights, in memory and on disk: f32, or bf16 "
              "(16 bits each, arithmetic in f32, updates rounded stochastically). bf16 halves "
              "the weights' bytes, so --embedding_memory_budget holds more rows; it changes the "
              "model by its rounding (AUC measured in the README). Checkpoints and exports hold "
              "f32 either way.");
DEFINE_string(embedding_dir, "",
              "Directory of the embedding disk tier. Empty: a fresh temporary directory, "
              "removed when the run ends.");
DEFINE_int64(embedding_reserve_rows, -1,
             "Embedding rows to make room for before the first step, so that the steps do "
             "not fault in memory or grow the key index for new rows. -1: for data loaded "
             "into memory, without --embedding_memory_budget or --admission, its distinct "
             "keys (estimated) plus 2%. 0: none. N > 0: N rows.");
DEFINE_validator(embedding_reserve_rows, &ember::tools::IsAutoOrNonNegative64);
DEFINE_bool(prefetch, true,
            "With a disk tier, load the rows of the next batch while the current one trains.");
DEFINE_bool(read_ahead, true,
            "--pipeline=off: read the next batch and find its unique keys on a low-priority "
            "thread while the current one trains (same result; false: between steps).");
DEFINE_string(dense_optimizer, "adam", "Dense optimizer: sgd, adagrad or adam.");
DEFINE_double(dense_lr, 0.001, "Dense learning rate.");
DEFINE_bool(shuffle, true,
            "Shuffle the training examples every epoch (seeded by --seed): all of them with "
            "--reader=memory; with --reader=stream the file order, the pieces of each file "
            "and a --shuffle_buffer of examples.");
DEFINE_int64(dense_bucket_kib, 1024,
             "Under mpirun with the dense model on the CPU: the dense gradients are all-reduced in "
             "buckets of about this many KiB (the last layers' first) on a thread of their own "
             "while the backward of earlier layers runs; the same bits as one all-reduce. 0: one "
             "all-reduce after the backward.");
DEFINE_validator(dense_bucket_kib, &ember::tools::IsNonNegative64);
DEFINE_bool(shard_in_memory_data, true,
            "Under mpirun with data in memory: each rank reads and holds only its share of the "
            "training examples (every N-th), and the ranks swap examples at each epoch's start "
            "so that each holds its rows of that epoch's global batches (the same batches, the "
            "same model); memory per rank falls with the ranks. false: every rank holds every "
            "example and slices each global batch.");
DEFINE_string(reader, "auto",
              "How --train_data is read: memory (every example loaded, then batched), stream "
              "(read in ~1 MiB pieces on --reader_threads threads while training runs, with "
              "bounded memory: for data larger than memory) or auto (stream when --test_data "
              "is given; memory when the test set is held out of the training data, or the "
              "data is generated).");
DEFINE_int32(reader_threads, 0,
             "Parser threads of --reader=stream; 0: a quarter of --threads, at least 1.");
DEFINE_validator(reader_threads, &ember::tools::IsNonNegative32);
DEFINE_int64(shuffle_buffer, 100000,
             "With --reader=stream and --shuffle: examples in the shuffle buffer (memory: "
             "about 500 bytes each for Criteo rows); 0: no buffer.");
DEFINE_validator(shuffle_buffer, &ember::tools::IsNonNegative64);
DEFINE_int32(num_shards, 1,
             "With --reader=stream: the training data is cut into this many shards, one per "
             "worker of a data-parallel job; each gets the same number of batches per epoch.");
DEFINE_validator(num_shards, &ember::tools::IsPositive32);
DEFINE_int32(shard_index, 0, "With --num_shards: the shard this worker reads, from 0.");
DEFINE_int64(piece_kib, 0,
             "With --reader=stream: KiB of text per piece (the unit of parsing, shuffling and "
             "sharding; columnar pieces have a row per 256 bytes of it). 0: 1024, or less for "
             "small input so that every shard has at least 8 pieces.");
DEFINE_validator(piece_kib, &ember::tools::IsNonNegative64);
DEFINE_validator(shard_index, &ember::tools::IsNonNegative32);
DEFINE_string(pipeline, "on",
              "on: run read, unique, pull, dense and push as an asynchronous pipeline (a worker "
              "per stage, --pipeline_depth batches in flight); off: one batch at a time through "
              "every stage (the reference; same result with --max_staleness=0).");
DEFINE_int32(pipeline_depth, 4, "--pipeline=on: batches in flight (buffers between stages).");
DEFINE_validator(pipeline_depth, &ember::tools::IsPositive32);
DEFINE_string(dense_device, "auto",
              "Where the dense step (the model's forward, backward and optimizer) runs: cpu, cuda "
              "(device 0) or cuda:N. auto: the planner's choice with --plan=auto (a GPU when this "
              "build has CUDA, a device is present and it is faster), else cpu.");
DEFINE_string(dense_precision, "f32",
              "The dense step's GEMM arithmetic: f32, or bf16/f16 (16-bit inputs, f32 "
              "accumulation and f32 master weights). On the CPU: f32, or bf16 where the CPU "
              "multiplies bf16 in hardware (AMX, AVX512-BF16; about 1.5x faster DLRM steps).");
DEFINE_int32(dense_row_shards, 0,
             "CPU dense step: split each batch into this many ranges of rows, each run through "
             "the whole model on one thread (its rows stay in that core's caches), the "
             "parameter gradients summed in range order. 0: one range per thread of the dense "
             "stage; 1: no split, every layer on the whole batch with all the threads. A "
             "fixed number N >= 2 makes the dense step's results the same bits whatever "
             "--threads is (its kernels then run single-threaded); 0 and 1 depend on it.");
DEFINE_validator(dense_row_shards, &ember::tools::IsNonNegative32);
DEFINE_string(stage_threads, "",
              "--pipeline=on: threads of the unique, pull, dense and push stages, comma-separated "
              "(e.g. 1,1,2,1; each at most --threads). Empty: the planner's split with "
              "--plan=auto, else 1 for unique, a quarter of --threads for pull and push and all "
              "of them for dense.");
DEFINE_int32(max_staleness, 0,
             "--pipeline=on: the most pushes of earlier batches a pulled embedding row may miss; "
             "0 trains exactly as --pipeline=off does.");
DEFINE_validator(max_staleness, &ember::tools::IsNonNegative32);
DEFINE_bool(early_pulls, true,
            "--pipeline=on: a pull waits only for in-flight batches that share rows with it "
            "(false: for the last --max_staleness + 1 pushes, whatever their rows).");
DEFINE_double(watchdog_seconds, 300,
              "Log a warning naming the stage that stays on one batch longer than this; 0: off.");
DEFINE_validator(watchdog_seconds, &ember::tools::IsNonNegativeDouble);
DEFINE_string(checkpoint_dir, "",
              "Write training checkpoints here (dense weights and optimizer state, embedding "
              "rows, the step): every --checkpoint_every_steps steps and when training ends or a "
              "signal stops it. Empty: none.");
DEFINE_int64(checkpoint_every_steps, 1000,
             "With --checkpoint_dir: steps between checkpoints; 0: only the final one.");
DEFINE_validator(checkpoint_every_steps, &ember::tools::IsNonNegative64);
DEFINE_bool(resume, true,
            "With --checkpoint_dir holding checkpoints: continue from the newest, giving the "
            "result of an uninterrupted run; the flags that decide that result must be those "
            "recorded in <checkpoint_dir>/job.flags (how long to train, outputs, threads, "
            "--pipeline and the disk tier may change). false: refuse to start.");
DEFINE_double(rank_timeout_seconds, 60,
              "Under mpirun: the longest a rank waits for the others in an exchange before the "
              "job fails, naming the ranks that did not answer (a rank that dies is reported by "
              "mpirun at once). Raise it if saving one rank's checkpoint takes longer.");
DEFINE_validator(rank_timeout_seconds, &ember::tools::IsPositiveDouble);
DEFINE_bool(expert_parallel, true,
            "Under mpirun, --model=moe: divide the experts among the ranks, each computing its "
            "experts for every rank's examples (all-to-all dispatch and combine); --num_experts "
            "must then be a multiple of the ranks (left at its default, this flag turns itself "
            "off when it is not). On GPUs the rows move over NCCL. false: every rank computes "
            "every expert for its own examples. Both train the same model.");
DEFINE_int32(pipeline_parallel, 1,
             "Under mpirun: split the dense model into stages over this many ranks (every rank "
             "of the job: -np must equal it). Rank 0 reads the data and holds the embedding "
             "table; each rank runs --virtual_stages chunks of the dense graph in a 1F1B or "
             "interleaved 1F1B schedule. 1: no split.");
DEFINE_validator(pipeline_parallel, &ember::tools::IsPositive32);
DEFINE_string(mesh, "",
              "Under mpirun: the job's layout over its ranks as a mesh of named axes, "
              "AXIS:SIZE,... with axes pipeline (stages of the dense model), data (each rank "
              "trains examples of its own) and expert (the MoE experts divided among the "
              "ranks, each also training examples of its own), e.g. data:4 or pipeline:2. The "
              "product must be -np; axes of size 1 may be left out. This Ember runs one axis "
              "above 1 at a time. Empty: what --pipeline_parallel and --expert_parallel say "
              "(data:N otherwise).");
DEFINE_string(table_sharding, "",
              "Under mpirun: how each embedding table (slot) spreads over the ranks, "
              "SLOTS=SHARDING,... with SLOTS a slot, a range a-b or default, and SHARDING "
              "row_wise[@AXIS] (rows by key over every rank, or over a mesh axis), "
              "table_wise@RANK, replicated or column_wise@AXIS, e.g. "
              "'default=row_wise,0-1=replicated'. This Ember runs row_wise over every rank. "
              "Empty: every table row-wise over every rank.");
DEFINE_int32(virtual_stages, 1,
             "With --pipeline_parallel: chunks of the dense graph per rank (interleaved 1F1B "
             "when > 1; then --micro_batches must suit --pipeline_group: by default a "
             "multiple of --pipeline_parallel).");
DEFINE_validator(virtual_stages, &ember::tools::IsPositive32);
DEFINE_int32(micro_batches, 1,
             "Micro-batches per step: each batch's dense forward and backward run in this many "
             "parts whose gradients are summed before one optimizer step (the pipeline's "
             "micro-batches with --pipeline_parallel; gradient accumulation without, also on "
             "every data-parallel rank under mpirun, whose summed gradients are all-reduced "
             "before the step).");
DEFINE_validator(micro_batches, &ember::tools::IsPositive32);
DEFINE_int32(pipeline_group, 0,
             "With --virtual_stages > 1 (interleaved 1F1B): micro-batches that pass through "
             "each chunk in turn (Megatron's microbatch group size per virtual stage), in "
             "[--pipeline_parallel, --micro_batches], and --micro_batches mod it 0 or at least "
             "--pipeline_parallel. 0: --pipeline_parallel.");
DEFINE_validator(pipeline_group, &ember::tools::IsNonNegative32);
DEFINE_string(pipeline_schedule, "",
              "With --pipeline_parallel or --micro_batches: the schedule, gpipe, 1f1b, "
              "interleaved or zb-h1 (1F1B with each backward split into its input gradient and "
              "its weight gradients, which fill the bubble: about a third of 1F1B's at the "
              "memory of its first rank; --virtual_stages=1); empty: interleaved when "
              "--virtual_stages > 1, else 1f1b (`ember plan --draw_schedule` draws one).");
DEFINE_bool(model_hash, false,
            "After training, print a hash of the whole trained state (dense weights and "
            "optimizer state, every embedding row by key) and add it to --metrics_out: equal "
            "hashes mean bit-identical models. Costs a scan of the table.");
DEFINE_string(metrics_out, "",
              "Write test and training metrics as JSON to this file (atomically); empty: don't.");
DEFINE_string(trace_file, "",
              "Write a Chrome trace (one span per stage per batch) to this file; empty: don't.");
DEFINE_int64(eval_every_steps, 0,
             "Evaluate on --test_data (or the held-out --test_fraction) every this many "
             "training steps, and when training ends; the history (step, examples, train loss, "
             "test AUC and logloss, samples/s) goes to the log and to train.history in "
             "--metrics_out. 0: only the final evaluation. Evaluating does not change the model.");
DEFINE_validator(eval_every_steps, &ember::tools::IsNonNegative64);
DEFINE_bool(eval_every_epoch, false,
            "Evaluate as --eval_every_steps does at the end of every epoch.");
DEFINE_string(plot_out, "",
              "Draw the run's curves (training loss, test AUC and logloss against training "
              "examples, from the evaluations of --eval_every_steps / --eval_every_epoch and the "
              "final one) into this SVG file; empty: don't.");

DEFINE_string(export_dir, "",
              "When training ends, write the serving bundle of the trained model here (a "
              "directory, written atomically; see `ember export`, `ember predict`); empty: "
              "don't.");
