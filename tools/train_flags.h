#pragma once

// The flags of `ember train` (defined in train_command.cc) that planning
// (plan_flags.cc) reads too: `ember plan` and `--plan=auto` cost the job
// these flags describe.

#include <gflags/gflags_declare.h>

DECLARE_string(train_data);
DECLARE_string(test_data);
DECLARE_double(test_fraction);
DECLARE_string(model);
DECLARE_int32(num_experts);
DECLARE_string(expert_mlp);
DECLARE_int32(moe_top_k);
DECLARE_double(moe_capacity_factor);
DECLARE_string(moe_expert_mlp);
DECLARE_double(moe_aux_loss_weight);
DECLARE_string(moe_gate_input);
DECLARE_int32(cross_layers);
DECLARE_int32(cross_rank);
DECLARE_int32(embedding_dim);
DECLARE_string(bottom_mlp);
DECLARE_string(top_mlp);
DECLARE_int32(batch_size);
// Read by tools/train_data.cc too.
DECLARE_string(reader);
DECLARE_int32(reader_threads);
DECLARE_int64(piece_kib);
DECLARE_bool(shuffle);
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
