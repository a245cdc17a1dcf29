#include "core/trace.h"

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/file.h"

namespace ember {
namespace {

TEST(TracerTest, SpansAreRecordedWithNameCategoryAndBatch) {
  Tracer tracer;
  { TraceSpan span(&tracer, "pull", "stage", 7); }
  std::vector<Tracer::Event> events = tracer.Events();
  ASSERT_EQ(1u, events.size());
  EXPECT_EQ("pull", events[0].name);
  EXPECT_EQ("stage", events[0].category);
  EXPECT_EQ(7, events[0].batch);
  EXPECT_GE(events[0].duration_us, 0);
}

// Code that traces takes a null Tracer when tracing is off: its spans are
// recorded nowhere, and a tracer used beside them keeps only its own.
TEST(TracerTest, SpansWithoutATracerAreRecordedNowhere) {
  Tracer tracer;
  {
    TraceSpan traced(&tracer, "pull", "stage", 1);
    TraceSpan untraced(nullptr, "push", "stage", 2);
  }
  { TraceSpan untraced(nullptr, "dense", "stage", 3); }
  const std::vector<Tracer::Event> events = tracer.Events();
  ASSERT_EQ(1u, events.size());
  EXPECT_EQ("pull", events[0].name);
  EXPECT_EQ(1, events[0].batch);
}

TEST(TracerTest, ConcurrentSpansAreAllKept) {
  Tracer tracer;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tracer, t] {
      for (int i = 0; i < 100; ++i) TraceSpan span(&tracer, "work", "test", t * 100 + i);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(400u, tracer.Events().size());
}

TEST(TracerTest, WritesChromeTraceJson) {
  Tracer tracer;
  tracer.Record("dense \"fwd\"", "stage", 10, 25, 3);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ember_trace_test_" + std::to_string(::getpid()) + ".json"))
          .string();
  ASSERT_TRUE(tracer.WriteJson(path).ok());
  Result<std::string> json = ReadFile(path);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(std::string::npos, json->find("\"traceEvents\""));
  EXPECT_NE(std::string::npos, json->find("\"name\":\"dense \\\"fwd\\\"\""));
  EXPECT_NE(std::string::npos, json->find("\"ph\":\"X\",\"ts\":10,\"dur\":15"));
  EXPECT_NE(std::string::npos, json->find("\"args\":{\"batch\":3}"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ember
