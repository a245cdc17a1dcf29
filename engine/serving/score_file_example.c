/* A small C program that scores a file with libember_serving:
 *
 *   ember_serving_example BUNDLE_DIR INPUT [--unlabelled]
 *
 * reads INPUT (text in the format the bundle's model was trained on, one
 * example per line), scores it in batches of up to 4096 lines and prints one
 * line per example: its probabilities, tab-separated, as `ember predict`
 * writes them. Exit status 0 on success, 1 on a usage error, 2 on a
 * scoring error (its message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember_serving.h"

enum { kBatchLines = 4096 };

static int ScoreBatch(ember_model* model, char** lines, size_t count, int labelled,
                      float* scores) {
  ember_error error;
  const int tasks = ember_model_num_tasks(model);
  if (ember_score_lines(model, (const char* const*)lines, count, labelled, scores, &error) !=
      EMBER_OK) {
    fprintf(stderr, "ember_serving_example: %s\n", error.message);
    return 0;
  }
  for (size_t i = 0; i < count; ++i) {
    for (int t = 0; t < tasks; ++t) {
      printf("%.9g%c", scores[i * tasks + t], t + 1 < tasks ? '\t' : '\n');
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--unlabelled") != 0)) {
    fprintf(stderr, "usage: %s BUNDLE_DIR INPUT [--unlabelled]\n", argv[0]);
    return 1;
  }
  const int labelled = argc == 3;
  ember_model* model = NULL;
  ember_error error;
  if (ember_model_open(argv[1], 1, &model, &error) != EMBER_OK) {
    fprintf(stderr, "ember_serving_example: %s\n", error.message);
    return 2;
  }
  FILE* input = fopen(argv[2], "r");
  if (input == NULL) {
    fprintf(stderr, "ember_serving_example: cannot open %s\n", argv[2]);
    ember_model_close(model);
    return 2;
  }
  char** lines = calloc(kBatchLines, sizeof(char*));
  float* scores = malloc(sizeof(float) * kBatchLines * (size_t)ember_model_num_tasks(model));
  size_t count = 0;
  int ok = lines != NULL && scores != NULL;
  char* line = NULL;
  size_t capacity = 0;
  ssize_t length;
  while (ok && (length = getline(&line, &capacity, input)) >= 0) {
    while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r')) {
      line[--length] = '\0';
    }
    lines[count++] = strdup(line);
    if (count == kBatchLines) {
      ok = ScoreBatch(model, lines, count, labelled, scores);
      for (size_t i = 0; i < count; ++i) free(lines[i]);
      count = 0;
    }
  }
  if (ok && count > 0) ok = ScoreBatch(model, lines, count, labelled, scores);
  for (size_t i = 0; i < count; ++i) free(lines[i]);
  free(line);
  free(lines);
  free(scores);
  fclose(input);
  ember_model_close(model);
  return ok ? 0 : 2;
}
