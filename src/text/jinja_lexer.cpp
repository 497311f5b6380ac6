// Lexing of chat templates: Jinja2's syntax with the whitespace rules transformers compiles
// templates under (trim_blocks, lstrip_blocks, newlines normalised, one trailing newline
// dropped).
#include <fmt/format.h>

#include <cctype>

#include "astraflow/core/error.hpp"
#include "text/jinja_lexer.hpp"
#include "text/unicode.hpp"

namespace astraflow::jinja {

[[noreturn]] void syntaxError(int line, const std::string& what) {
  throw Error(fmt::format("chat template line {}: {}", line, what));
}

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string normaliseNewlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(normaliseNewlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    bool strip_next = false;  // the previous tag ended with '-'
    while (pos_ < s_.size()) {
      const std::size_t open = findOpen(pos_);
      std::string text = s_.substr(pos_, open - pos_);
      if (strip_next) {
        std::size_t k = 0;
        while (k < text.size() && isSpace(text[k])) ++k;
        text.erase(0, k);
        strip_next = false;
      }
      if (open == s_.size()) {
        emitText(text);
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      std::size_t inner = open + 2;
      const char sign = inner < s_.size() && (s_[inner] == '-' || s_[inner] == '+') ? s_[inner] : 0;
      if (sign) ++inner;
      if (sign == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone after a line's indentation takes it away.
        const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          bool blank = line_start < text.size();
          for (std::size_t k = line_start; k < text.size(); ++k) blank = blank && isSpace(text[k]);
          if (blank) text.erase(line_start);
        }
      }
      line_ += countLines(pos_, open);
      emitText(text);
      pos_ = inner;
      bool trim_sign = false, keep_sign = false;
      if (kind == '#') {
        const std::size_t close = s_.find("#}", pos_);
        if (close == std::string::npos) syntaxError(line_, "a comment is not closed");
        trim_sign = close > pos_ && s_[close - 1] == '-';
        keep_sign = close > pos_ && s_[close - 1] == '+';
        line_ += countLines(pos_, close);
        pos_ = close + 2;
      } else {
        tokens_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line_});
        lexTag(kind == '{' ? '}' : '%', trim_sign, keep_sign);
        tokens_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line_});
      }
      line_starting = false;
      if (trim_sign) {
        strip_next = true;
      } else if (kind != '{' && !keep_sign && pos_ < s_.size() && s_[pos_] == '\n') {
        ++pos_;  // trim_blocks: the newline after a block tag goes
        ++line_;
        line_starting = true;
      }
    }
    tokens_.push_back({Tok::End, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t findOpen(std::size_t from) const {
    for (std::size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1)) {
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    }
    return s_.size();
  }
  int countLines(std::size_t from, std::size_t to) const {
    int n = 0;
    for (std::size_t k = from; k < to && k < s_.size(); ++k) n += s_[k] == '\n';
    return n;
  }
  void emitText(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Tok::Text, text, line_});
  }

  // The tokens of one tag up to its closing `}}` or `%}` (outside brackets and strings).
  void lexTag(char closer, bool& trim_sign, bool& keep_sign) {
    int depth = 0;
    while (true) {
      while (pos_ < s_.size() && isSpace(s_[pos_])) line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size()) syntaxError(line_, "a tag is not closed");
      const char c = s_[pos_];
      if (depth == 0) {
        for (const char sign : {'-', '+', '\0'}) {
          const std::string end = sign ? std::string{sign, closer, '}'} : std::string{closer, '}'};
          if (s_.compare(pos_, end.size(), end) == 0) {
            trim_sign = sign == '-';
            keep_sign = sign == '+';
            pos_ += end.size();
            return;
          }
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const std::size_t start = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
        tokens_.push_back({Tok::Name, s_.substr(start, pos_ - start), line_});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lexNumber();
      } else if (c == '\'' || c == '"') {
        lexString(c);
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                           ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        bool matched = false;
        for (const char* op : kOps) {
          const std::string o(op);
          if (s_.compare(pos_, o.size(), o) == 0) {
            if (o == "(" || o == "[" || o == "{") ++depth;
            if (o == ")" || o == "]" || o == "}") --depth;
            tokens_.push_back({Tok::Op, o, line_});
            pos_ += o.size();
            matched = true;
            break;
          }
        }
        if (!matched) syntaxError(line_, fmt::format("unexpected character '{}'", c));
      }
    }
  }

  void lexNumber() {
    const std::size_t start = pos_;
    bool is_float = false;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    std::string text;
    for (std::size_t k = start; k < pos_; ++k)
      if (s_[k] != '_') text += s_[k];
    tokens_.push_back({is_float ? Tok::Float : Tok::Int, text, line_});
  }

  void lexString(char quote) {
    std::string out;
    ++pos_;
    while (true) {
      if (pos_ >= s_.size()) syntaxError(line_, "a string is not closed");
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) syntaxError(line_, "a string is not closed");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + digits > s_.size()) syntaxError(line_, "a \\x/\\u escape is cut short");
          const char32_t code = static_cast<char32_t>(std::stoul(s_.substr(pos_, digits), nullptr, 16));
          pos_ += digits;
          unicode::appendUtf8(out, code);
          break;
        }
        default: out += '\\'; out += e;  // Python keeps unknown escapes as they are
      }
    }
    if (!tokens_.empty() && tokens_.back().type == Tok::String)
      tokens_.back().text += out;  // 'a' 'b' is 'ab'
    else
      tokens_.push_back({Tok::String, out, line_});
  }

  std::string s_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lexTemplate(const std::string& source) { return Lexer(source).run(); }

}  // namespace astraflow::jinja
