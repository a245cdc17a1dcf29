/* Scores the lines of a file with an installed libember_serving and prints
 * the mean score and the count: `consumer BUNDLE INPUT`. */
#include <ember_serving.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s BUNDLE INPUT\n", argv[0]);
    return 1;
  }
  ember_model* model = NULL;
  ember_error error;
  if (ember_model_open(argv[1], 1, &model, &error) != EMBER_OK) {
    fprintf(stderr, "consumer: %s\n", error.message);
    return 2;
  }
  FILE* input = fopen(argv[2], "r");
  if (input == NULL) return 2;
  char* line = NULL;
  size_t capacity = 0;
  ssize_t length;
  double sum = 0;
  long count = 0;
  while ((length = getline(&line, &capacity, input)) >= 0) {
    if (length > 0 && line[length - 1] == '\n') line[length - 1] = '\0';
    const char* lines[1] = {line};
    float score = 0;
    if (ember_score_lines(model, lines, 1, 1, &score, &error) != EMBER_OK) {
      fprintf(stderr, "consumer: %s\n", error.message);
      return 2;
    }
    sum += score;
    ++count;
  }
  free(line);
  fclose(input);
  ember_model_close(model);
  printf("scored %ld examples, mean score %.6f\n", count, count > 0 ? sum / count : 0.0);
  return count > 0 && sum > 0 ? 0 : 2;
}
