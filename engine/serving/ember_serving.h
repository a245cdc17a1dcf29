/* libember_serving: scores examples with an Ember serving bundle (written by
 * `ember export` or `ember train --export_dir`), from C or any language with
 * a C FFI.
 *
 *   ember_model* model = NULL;
 *   ember_error error;
 *   if (ember_model_open("bundle", 1, &model, &error) != EMBER_OK) {
 *     fprintf(stderr, "%s\n", error.message);
 *   }
 *   const char* lines[] = {"1\t3\t...", ...};
 *   float scores[2];
 *   ember_score_lines(model, lines, 2, 1, scores, &error);
 *   ember_model_close(model);
 *
 * Scores are click probabilities, example-major: example i's task t at
 * scores[i * ember_model_num_tasks(model) + t]. A batch scores to the same
 * bits as `ember predict` scores it with the same --threads and batch.
 *
 * A service that reloads applies delta bundles (`ember export
 * --delta_base`, `ember train --export_every_steps`) to the open model:
 *
 *   ember_model_apply_delta(model, "bundle.delta-2000", &error);
 *
 * Thread safety: every function may be called concurrently on one model
 * (each scoring call runs on its own copy of the dense model, made on first
 * need), ember_model_apply_delta included: each scoring call sees the model
 * before the delta or after it, never a mix. ember_model_close must run
 * alone, after every other call on the model has returned.
 *
 * Errors: each call that can fail returns a code and, when `error` is not
 * NULL, fills it with the code and a message naming what is wrong (a file of
 * the bundle, a line, a count). Nothing aborts on bad input. */
#ifndef EMBER_SERVING_H_
#define EMBER_SERVING_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define EMBER_SERVING_API __attribute__((visibility("default")))
#else
#define EMBER_SERVING_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ember_code {
  EMBER_OK = 0,
  EMBER_INVALID_ARGUMENT = 1, /* bad input: a malformed line, wrong counts */
  EMBER_NOT_FOUND = 2,        /* no bundle at the path, or no MANIFEST.json */
  EMBER_DATA_LOSS = 3,        /* a corrupted, truncated or partly written bundle */
  EMBER_IO_ERROR = 4,         /* a file could not be read */
  EMBER_INTERNAL = 5,         /* anything else */
  EMBER_FAILED_PRECONDITION = 6 /* a delta of another base than the model's */
} ember_code;

typedef struct ember_error {
  ember_code code;
  char message[1024]; /* NUL-terminated; cut short when longer */
} ember_error;

typedef struct ember_model ember_model;

/* Opens the bundle in directory `bundle_dir`, checking every file's checksum
 * and the format version, and loads it; each scoring call then runs on
 * `threads` CPU threads (<= 0: every hardware thread). On success *model is
 * the model (close it with ember_model_close); on failure *model is NULL. */
EMBER_SERVING_API ember_code ember_model_open(const char* bundle_dir, int threads,
                                              ember_model** model, ember_error* error);

/* Applies the delta bundle in directory `delta_dir` to the open model (its
 * changed embedding rows, removed keys and dense weights), so that it scores
 * as the full bundle of the delta's step. Everything is read and checked
 * first: on any error the model is unchanged (EMBER_FAILED_PRECONDITION for a
 * delta of another base than the model's newest bundle, naming both; the
 * codes of ember_model_open for a damaged delta), but for a write that fails
 * halfway, after which every call on the model fails: reopen it. */
EMBER_SERVING_API ember_code ember_model_apply_delta(ember_model* model, const char* delta_dir,
                                                     ember_error* error);

/* Training steps behind the model now (its bundle's, or its last delta's);
 * -1 for NULL. */
EMBER_SERVING_API int64_t ember_model_step(const ember_model* model);

/* Frees the model; NULL is fine. */
EMBER_SERVING_API void ember_model_close(ember_model* model);

/* The model's shape: probabilities per example (tasks), dense features and
 * categorical slots per example. */
EMBER_SERVING_API int ember_model_num_tasks(const ember_model* model);
EMBER_SERVING_API int ember_model_num_dense(const ember_model* model);
EMBER_SERVING_API int ember_model_num_slots(const ember_model* model);

/* Scores `count` lines of text in the input format the model was trained on
 * (criteo, csv, libsvm, libffm or slot; each line without its line ending),
 * raw feature values hashed as training hashed them. `labelled`: 1 if the
 * lines begin with their label column(s), 0 if they lack them (criteo,
 * libsvm, libffm and slot input). Writes count * num_tasks scores.
 * EMBER_INVALID_ARGUMENT naming the first bad line (0-based) and why; for a
 * model trained on columnar files (use ember_score_keys) or csv with a
 * header line. */
EMBER_SERVING_API ember_code ember_score_lines(ember_model* model, const char* const* lines,
                                               size_t count, int labelled, float* scores,
                                               ember_error* error);

/* Scores `count` examples given as features: `dense` holds count *
 * num_dense values, already transformed as training's format transforms
 * them (criteo: log(1 + x), 0 for x <= 0); the keys of example i, slot s are
 * keys[offsets[i * num_slots + s] .. offsets[i * num_slots + s + 1]), with
 * offsets[0] == 0 and count * num_slots + 1 offsets in all (see
 * ember_hash_feature). Writes count * num_tasks scores. EMBER_INVALID_ARGUMENT
 * for offsets that do not increase or a NULL array with count > 0. */
EMBER_SERVING_API ember_code ember_score_keys(ember_model* model, size_t count,
                                              const float* dense, const int64_t* offsets,
                                              const uint64_t* keys, float* scores,
                                              ember_error* error);

/* The key of the raw categorical value `value` (`length` bytes; the empty
 * value is "missing") in slot `slot`, as training's input format hashed it.
 * 0 for a slot outside [0, num_slots). */
EMBER_SERVING_API uint64_t ember_hash_feature(const ember_model* model, int slot,
                                              const char* value, size_t length);

#ifdef __cplusplus
}
#endif

#endif /* EMBER_SERVING_H_ */
