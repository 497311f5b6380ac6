// BM25 against the bm25s library's "lucene" method (tests/tasks/bm25_reference.py) on a generated
// corpus with Zipf-like word frequencies and generated queries: every document's score for every
// query, and the top-k order they imply.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "astraflow/tasks/bm25.hpp"
#include "io/temp_dir.hpp"

using namespace astraflow;

TEST(Bm25, ScoresAsBm25s) {
  const char* py = std::getenv("ASTRAFLOW_PYTHON");
  const char* script = std::getenv("ASTRAFLOW_BM25_REFERENCE");
  ASSERT_TRUE(py && script) << "run under ctest (ASTRAFLOW_PYTHON, ASTRAFLOW_BM25_REFERENCE)";
  std::mt19937 rng(11);
  std::vector<std::string> words;
  for (int i = 0; i < 60; ++i) words.push_back(fmt::format("w{}", i));
  // Word i drawn with weight 1 / (i + 1): a few common words, a long tail of rare ones.
  std::vector<double> weights;
  for (int i = 0; i < 60; ++i) weights.push_back(1.0 / (i + 1));
  std::discrete_distribution<int> word(weights.begin(), weights.end());
  std::uniform_int_distribution<int> doc_length(1, 40), query_length(1, 4);
  nlohmann::json in = {{"documents", nlohmann::json::array()}, {"queries", nlohmann::json::array()}};
  std::vector<CorpusDocument> documents;
  for (int d = 0; d < 300; ++d) {
    std::vector<std::string> terms;
    for (int n = doc_length(rng); n > 0; --n) terms.push_back(words[static_cast<std::size_t>(word(rng))]);
    std::string text;
    for (const auto& t : terms) text += (text.empty() ? "" : " ") + t;
    in["documents"].push_back(terms);
    documents.push_back({std::to_string(d), "", text});
  }
  std::vector<std::string> queries;
  for (int q = 0; q < 40; ++q) {
    std::vector<std::string> terms;
    std::string text;
    for (int n = query_length(rng); n > 0; --n) {
      const std::string& w = words[static_cast<std::size_t>(word(rng))];
      if (std::find(terms.begin(), terms.end(), w) != terms.end()) continue;  // distinct words
      terms.push_back(w);
      text += (text.empty() ? "" : " ") + w;
    }
    in["queries"].push_back(terms);
    queries.push_back(text);
  }
  test::TempDir dir;
  std::ofstream(dir.file("in.json")) << in.dump();
  const Bm25Params params{1.2, 0.75};
  ASSERT_EQ(std::system(fmt::format("{} {} {} {} {} {}", py, script, dir.file("in.json"), dir.file("out.json"),
                                    params.k1, params.b)
                            .c_str()),
            0);
  std::ifstream out_file(dir.file("out.json"));
  const auto expected = nlohmann::json::parse(out_file)["scores"];
  const Bm25Index index(documents, params);
  ASSERT_EQ(expected.size(), queries.size());
  int compared = 0;
  for (std::size_t q = 0; q < queries.size(); ++q) {
    const std::vector<double> got = index.scores(queries[q]);
    ASSERT_EQ(expected[q].size(), got.size());
    for (std::size_t d = 0; d < got.size(); ++d) {
      const double want = expected[q][d].get<double>();  // bm25s keeps float32
      EXPECT_NEAR(got[d], want, 1e-5 + 1e-5 * std::abs(want)) << "query " << queries[q] << ", document " << d;
      compared += want > 0;
    }
    // search() is that ranking: best first, only matching documents.
    const auto hits = index.search(queries[q], 5);
    for (std::size_t i = 0; i + 1 < hits.size(); ++i) EXPECT_GE(hits[i].score, hits[i + 1].score);
    for (const auto& h : hits) EXPECT_NEAR(h.score, got[h.document], 1e-12);
  }
  EXPECT_GT(compared, 1000);  // most queries match many documents
}
