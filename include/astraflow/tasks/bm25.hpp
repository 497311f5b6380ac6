#pragma once
// A lexical index over a local document corpus for the `doc_search` tool (docs/tasks.md): Okapi
// BM25 as Lucene scores it (the `lucene` method of the bm25s library, which the tests compare
// with), over lower-cased words.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "astraflow/tasks/prompt_dataset.hpp"

namespace astraflow {

struct CorpusDocument {
  std::string id;  // the line's "id" (text or number), else its line number
  std::string title;
  std::string text;
};

struct Bm25Hit {
  std::size_t document = 0;  // index into the corpus
  double score = 0;
};

struct Bm25Params {
  double k1 = 1.2;  // term-frequency saturation
  double b = 0.75;  // length normalisation
};

// The words of `text`: maximal runs of ASCII letters and digits, and of bytes >= 0x80 (so UTF-8
// words stay whole), ASCII lower-cased. Everything else separates words.
std::vector<std::string> bm25Terms(std::string_view text);

class Bm25Index {
 public:
  Bm25Index(std::vector<CorpusDocument> documents, Bm25Params params = {});

  // A JSONL corpus, one {"text": ..., "title"?: ..., "id"?: ...} per line. Bad lines (not JSON,
  // no text) are skipped and counted in `report` with file and line; throws Error when the file
  // cannot be read or no line is usable.
  static Bm25Index loadJsonl(const std::filesystem::path& file, DatasetReport& report, Bm25Params params = {});

  // Sum over the query's distinct terms of idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl)),
  // idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)): the top `k` documents with a score > 0, best
  // first (ties: the earlier document).
  std::vector<Bm25Hit> search(std::string_view query, std::size_t k) const;
  // Every document's score for `query` (the tests compare them with the reference's).
  std::vector<double> scores(std::string_view query) const;

  const CorpusDocument& document(std::size_t i) const { return documents_.at(i); }
  std::size_t size() const { return documents_.size(); }

 private:
  struct Posting {
    std::uint32_t document;
    std::uint32_t count;
  };
  std::vector<CorpusDocument> documents_;
  std::vector<std::uint32_t> lengths_;  // words per document (title and text)
  std::unordered_map<std::string, std::vector<Posting>> postings_;
  double average_length_ = 0;
  Bm25Params params_;
};

}  // namespace astraflow
