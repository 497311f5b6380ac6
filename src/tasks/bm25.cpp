// Bm25Index: Okapi BM25 scored as Lucene does it (bm25s' `lucene` method) over a JSONL corpus's lower-cased words,
// the index behind the `doc_search` tool.
#include "astraflow/tasks/bm25.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "astraflow/core/error.hpp"
#include "tasks/jsonl_reader.hpp"

namespace astraflow {
namespace {

using json = nlohmann::ordered_json;

bool wordByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

// The document of one parsed line, or the reason it cannot be one.
std::string documentFrom(const json& j, std::size_t line, CorpusDocument& d) {
  if (!j.is_object()) return "not a JSON object";
  if (!j.contains("text") || !j["text"].is_string()) return "no \"text\" string";
  d.text = j["text"].get<std::string>();
  if (j.contains("title")) {
    if (!j["title"].is_string()) return "\"title\" is not text";
    d.title = j["title"].get<std::string>();
  }
  if (!j.contains("id"))
    d.id = std::to_string(line);
  else if (j["id"].is_string())
    d.id = j["id"].get<std::string>();
  else if (j["id"].is_number_integer())
    d.id = j["id"].dump();
  else
    return "\"id\" is neither text nor an integer";
  return "";
}

}  // namespace

std::vector<std::string> bm25Terms(std::string_view text) {
  std::vector<std::string> terms;
  std::string word;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (wordByte(c)) {
      word.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : ch);
    } else if (!word.empty()) {
      terms.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) terms.push_back(std::move(word));
  return terms;
}

Bm25Index::Bm25Index(std::vector<CorpusDocument> documents, Bm25Params params)
    : documents_(std::move(documents)), params_(params) {
  if (documents_.size() > std::numeric_limits<std::uint32_t>::max())
    throw Error(fmt::format("bm25: {} documents, past the index's 2^32", documents_.size()));
  lengths_.reserve(documents_.size());
  std::unordered_map<std::string, std::uint32_t> counts;
  double total = 0;
  for (std::size_t i = 0; i < documents_.size(); ++i) {
    counts.clear();
    // The title is searched with the text: a query naming the article should find it.
    auto terms = bm25Terms(documents_[i].title);
    for (auto& t : bm25Terms(documents_[i].text)) terms.push_back(std::move(t));
    for (const auto& t : terms) ++counts[t];
    for (const auto& [term, count] : counts) postings_[term].push_back({static_cast<std::uint32_t>(i), count});
    lengths_.push_back(static_cast<std::uint32_t>(terms.size()));
    total += static_cast<double>(terms.size());
  }
  average_length_ = documents_.empty() ? 0.0 : total / static_cast<double>(documents_.size());
}

Bm25Index Bm25Index::loadJsonl(const std::filesystem::path& file, DatasetReport& report, Bm25Params params) {
  std::vector<CorpusDocument> documents;
  detail::readJsonLines(file, "corpus", report, [&](const json& j, std::size_t number) {
    CorpusDocument d;
    std::string problem = documentFrom(j, number, d);
    if (problem.empty()) documents.push_back(std::move(d));
    return problem;
  });
  report.rows = documents.size();
  if (documents.empty())
    throw Error(
        fmt::format("corpus {}: no usable documents ({} lines, {} bad{})", file.string(), report.lines, report.bad,
                    report.first_issues.empty()
                        ? std::string()
                        : fmt::format("; e.g. line {}: {}", report.first_issues[0].line, report.first_issues[0].what)));
  return Bm25Index(std::move(documents), params);
}

std::vector<double> Bm25Index::scores(std::string_view query) const {
  std::vector<double> out(documents_.size(), 0.0);
  const auto n = static_cast<double>(documents_.size());
  std::unordered_set<std::string> seen;
  for (const auto& term : bm25Terms(query)) {
    if (!seen.insert(term).second) continue;  // a repeated query word counts once
    const auto it = postings_.find(term);
    if (it == postings_.end()) continue;
    const auto df = static_cast<double>(it->second.size());
    const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
    for (const Posting& p : it->second) {
      const double tf = p.count;
      const double norm = params_.k1 * (1.0 - params_.b + params_.b * lengths_[p.document] / average_length_);
      out[p.document] += idf * tf / (tf + norm);
    }
  }
  return out;
}

std::vector<Bm25Hit> Bm25Index::search(std::string_view query, std::size_t k) const {
  const std::vector<double> all = scores(query);
  std::vector<Bm25Hit> hits;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i] > 0) hits.push_back({i, all[i]});
  const auto better = [](const Bm25Hit& a, const Bm25Hit& b) {
    return a.score != b.score ? a.score > b.score : a.document < b.document;
  };
  const std::size_t keep = std::min(k, hits.size());
  std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(keep), hits.end(), better);
  hits.resize(keep);
  return hits;
}

}  // namespace astraflow
