#pragma once

// The flags of `ember train` (defined in train_flags.cc). Planning
// (plan_flags.cc) reads the first ones too: `ember plan` and `--plan=auto`
// cost the job these flags describe.

#include <gflags/gflags_declare.h>

DECLARE_string(train_data);
DECLARE_string(test_data);
DECLARE_double(test_fraction);
DECLARE_int32(embedding_dim);
DECLARE_string(top_mlp);
DECLARE_int32(batch_size);
// Read by tools/train_data.cc too.
DECLARE_string(reader);
DECLARE_int32(reader_threads);
DECLARE_int64(piece_kib);
DECLARE_bool(shuffle);
DECLARE_bool(shard_in_memory_data);
DECLARE_int64(dense_bucket_kib);
DECLARE_int64(shuffle_buffer);
DECLARE_int32(num_shards);
DECLARE_int32(epochs);
DECLARE_int64(max_steps);
DECLARE_string(sparse_optimizer);
DECLARE_string(embedding_memory_budget);
DECLARE_bool(prefetch);
DECLARE_string(dense_optimizer);
DECLARE_double(dense_lr);
DECLARE_string(pipeline);
DECLARE_int32(pipeline_depth);
DECLARE_string(stage_threads);
DECLARE_string(dense_device);
DECLARE_int32(max_staleness);
DECLARE_bool(early_pulls);
// Read by `ember export` and `ember eval` (tools/serving_flags.h) too.
DECLARE_string(checkpoint_dir);
DECLARE_string(metrics_out);

// Read by the command (train_command.cc) alone.
DECLARE_int64(timing_warmup_steps);
DECLARE_double(sparse_lr);
DECLARE_double(ftrl_beta);
DECLARE_double(ftrl_l1);
DECLARE_double(ftrl_l2);
DECLARE_string(admission);
DECLARE_int64(admission_min_count);
DECLARE_double(admission_probability);
DECLARE_int64(embedding_ttl_steps);
DECLARE_string(embedding_eviction);
DECLARE_string(embedding_weights);
DECLARE_string(embedding_dir);
DECLARE_int64(embedding_reserve_rows);
DECLARE_bool(read_ahead);
DECLARE_int32(shard_index);
DECLARE_string(dense_precision);
DECLARE_int32(dense_row_shards);
DECLARE_double(watchdog_seconds);
DECLARE_int64(checkpoint_every_steps);
DECLARE_bool(resume);
DECLARE_double(rank_timeout_seconds);
DECLARE_bool(expert_parallel);
DECLARE_int32(pipeline_parallel);
DECLARE_string(mesh);
DECLARE_string(table_sharding);
DECLARE_int32(virtual_stages);
DECLARE_int32(micro_batches);
DECLARE_int32(pipeline_group);
DECLARE_string(pipeline_schedule);
DECLARE_bool(model_hash);
DECLARE_string(trace_file);
DECLARE_int64(eval_every_steps);
DECLARE_bool(eval_every_epoch);
DECLARE_string(plot_out);
DECLARE_string(export_dir);
