// Bench results side by side: reading the columns, the text and markdown tables.
#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/measure/compare.h"
#include "tpmsec/strategy.h"

namespace tpmsec {
namespace {

using nlohmann::json;

std::string text_of(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : std::string();
}

// A distribution that must be there, with numbers where numbers belong.
Result<Distribution> distribution_at(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj[key].is_object()) return usage_error(fmt::format("{}.{} is missing", where, key));
  const json& d = obj[key];
  for (const char* k : {"median", "p99"}) {
    if (!d.contains(k) || !d[k].is_number()) return usage_error(fmt::format("{}.{}.{} is not a number", where, key, k));
  }
  return distribution_from_json(d);
}

std::string tpm_label(const json& tpm) {
  if (text_of(tpm, "imported") == "ftrace")
    return text_of(tpm, "label").empty() ? "unknown TPM" : text_of(tpm, "label");
  std::string out = text_of(tpm, "manufacturer");
  std::string vendor = text_of(tpm, "vendor");
  if (!vendor.empty()) out += (out.empty() ? "" : " ") + vendor;
  std::string firmware = text_of(tpm, "firmware_version");
  if (!firmware.empty()) out += " fw " + firmware;
  return out.empty() ? "unknown TPM" : out;
}

std::string source_label(const json& bench, const json& tpm) {
  if (text_of(tpm, "imported") == "ftrace" || text_of(bench, "clock") == "ftrace") return "ftrace import";
  if (tpm.contains("emulated") && tpm["emulated"].is_boolean() && tpm["emulated"].get<bool>()) {
    std::string profile = text_of(tpm, "profile");
    return "emulated: " + (profile.empty() ? std::string("?") : profile);
  }
  std::string transport = text_of(bench, "transport");
  return transport.empty() ? "real TPM" : fmt::format("real TPM ({})", transport);
}

// "151.2", "24.36", "0.052": about four significant digits, as the tables show them.
std::string ms(double v) {
  if (v >= 100) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3f}", v);
}

std::string command_cell(const CompareColumn& c, const std::string& row) {
  auto it = std::find_if(c.commands.begin(), c.commands.end(), [&row](const auto& p) { return p.first == row; });
  if (it == c.commands.end()) return "-";
  return fmt::format("{} / {}", ms(it->second.median), ms(it->second.p99));
}

std::string strategy_cell(const CompareColumn& c, const std::string& row) {
  auto it = c.strategies.find(row);
  if (it == c.strategies.end() || it->second.per_extend_ms.n == 0) return "-";
  std::string out = fmt::format("{} / {}", ms(it->second.per_extend_ms.median), ms(it->second.per_extend_ms.p99));
  if (it->second.ratio_to_plain > 0) out += fmt::format(" ({:.1f}x)", it->second.ratio_to_plain);
  return out;
}

// The table as rows of cells; an empty-celled row with a title is a section.
struct Table {
  std::vector<std::vector<std::string>> header;  // TPM, source, file
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> section;
};

Table table_of(const Comparison& c) {
  Table t;
  std::vector<std::string> tpm{"TPM"}, source{"source"}, file{"file"};
  for (const auto& col : c.columns) {
    tpm.push_back(col.tpm);
    source.push_back(col.source);
    file.push_back(col.origin);
  }
  t.header = {tpm, source, file};
  auto add = [&](std::vector<std::string> row, bool section) {
    row.resize(c.columns.size() + 1);
    t.rows.push_back(std::move(row));
    t.section.push_back(section);
  };
  if (!c.commands.empty()) {
    add({"command: TPM ms, median / p99"}, true);
    for (const auto& name : c.commands) {
      std::vector<std::string> row{name};
      for (const auto& col : c.columns) row.push_back(command_cell(col, name));
      add(row, false);
    }
  }
  if (!c.strategies.empty()) {
    add({"strategy: ms per extend, median / p99 (x plain)"}, true);
    for (const auto& name : c.strategies) {
      std::vector<std::string> row{name};
      for (const auto& col : c.columns) row.push_back(strategy_cell(col, name));
      add(row, false);
    }
  }
  return t;
}

// Display width: UTF-8 continuation bytes take no column.
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t w) { return s + std::string(w > width(s) ? w - width(s) : 0, ' '); }

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '\n' || ch == '\r')
      out += ' ';
    else
      out += ch;
  }
  return out;
}

}  // namespace

Result<CompareColumn> compare_column(const json& bench, const std::string& origin) {
  auto bad = [&origin](const std::string& what) { return usage_error(fmt::format("{}: {}", origin, what)); };
  if (!bench.is_object() || text_of(bench, "schema") != "tpmsec-bench/1") {
    return bad("not a tpmsec bench result (schema tpmsec-bench/1)");
  }
  if (!bench.contains("tpm") || !bench["tpm"].is_object()) return bad("malformed bench result: no 'tpm' object");
  for (const char* list : {"primitives", "strategies"}) {
    if (!bench.contains(list) || !bench[list].is_array()) {
      return bad(fmt::format("malformed bench result: '{}' is not an array", list));
    }
  }
  try {
    CompareColumn col;
    col.origin = origin;
    col.tpm = tpm_label(bench["tpm"]);
    col.source = source_label(bench, bench["tpm"]);
    const json& primitives = bench["primitives"];
    for (size_t i = 0; i < primitives.size(); ++i) {
      std::string where = fmt::format("primitives[{}]", i);
      const json& p = primitives[i];
      if (!p.is_object() || text_of(p, "name").empty()) return bad(where + " has no name");
      auto d = distribution_at(p, "tpm_ms", where);
      if (!d.ok()) return bad("malformed bench result: " + d.error().message());
      col.commands.emplace_back(text_of(p, "name"), *d);
    }
    const json& strategies = bench["strategies"];
    for (size_t i = 0; i < strategies.size(); ++i) {
      std::string where = fmt::format("strategies[{}]", i);
      const json& s = strategies[i];
      if (!s.is_object() || text_of(s, "name").empty()) return bad(where + " has no name");
      auto d = distribution_at(s, "per_extend_ms", where);
      if (!d.ok()) return bad("malformed bench result: " + d.error().message());
      CompareColumn::Strategy st;
      st.per_extend_ms = *d;
      if (s.contains("ratio_to_plain") && s["ratio_to_plain"].is_number())
        st.ratio_to_plain = s["ratio_to_plain"].get<double>();
      col.strategies[text_of(s, "name")] = st;
    }
    return col;
  } catch (const nlohmann::json::exception& e) {
    return bad(fmt::format("malformed bench result: {}", e.what()));
  }
}

Comparison compare_columns(std::vector<CompareColumn> columns) {
  Comparison c;
  c.columns = std::move(columns);
  for (const auto& col : c.columns) {
    for (const auto& [name, d] : col.commands) {
      if (std::find(c.commands.begin(), c.commands.end(), name) == c.commands.end()) c.commands.push_back(name);
    }
  }
  for (StrategyKind kind : all_strategies()) {
    std::string name(strategy_name(kind));
    for (const auto& col : c.columns) {
      if (col.strategies.count(name)) {
        c.strategies.push_back(name);
        break;
      }
    }
  }
  // Strategies this build does not know (a newer result) go last, by name.
  for (const auto& col : c.columns) {
    for (const auto& [name, s] : col.strategies) {
      if (std::find(c.strategies.begin(), c.strategies.end(), name) == c.strategies.end()) c.strategies.push_back(name);
    }
  }
  return c;
}

std::string compare_text(const Comparison& c) {
  Table t = table_of(c);
  std::vector<size_t> w(c.columns.size() + 1, 0);
  auto measure = [&w](const std::vector<std::string>& row, bool section) {
    for (size_t i = section ? 1 : 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]) + (i == 0 ? 2 : 0));
  };
  for (const auto& row : t.header) measure(row, false);
  for (size_t r = 0; r < t.rows.size(); ++r) measure(t.rows[r], t.section[r]);
  std::string out;
  auto line = [&](const std::vector<std::string>& row, const std::string& indent) {
    std::string l = pad(indent + row[0], w[0]);
    for (size_t i = 1; i < row.size(); ++i) l += "   " + pad(row[i], w[i]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  for (const auto& row : t.header) line(row, "");
  for (size_t r = 0; r < t.rows.size(); ++r) {
    if (t.section[r]) {
      out += "\n" + t.rows[r][0] + "\n";
    } else {
      line(t.rows[r], "  ");
    }
  }
  return out;
}

std::string compare_markdown(const Comparison& c) {
  Table t = table_of(c);
  std::string out = "| |";
  for (size_t i = 0; i < c.columns.size(); ++i) {
    out += fmt::format(" **{}**<br>{}<br>`{}` |", markdown_cell(t.header[0][i + 1]), markdown_cell(t.header[1][i + 1]),
                       markdown_cell(t.header[2][i + 1]));
  }
  out += "\n|---|";
  for (size_t i = 0; i < c.columns.size(); ++i) out += "---:|";
  out += "\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    out +=
        t.section[r] ? fmt::format("| **{}** |", markdown_cell(row[0])) : fmt::format("| {} |", markdown_cell(row[0]));
    for (size_t i = 1; i < row.size(); ++i) out += fmt::format(" {} |", markdown_cell(row[i]));
    out += "\n";
  }
  return out;
}

}  // namespace tpmsec
