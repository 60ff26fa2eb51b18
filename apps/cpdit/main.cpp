// cpdit: diffusion transformers with context parallelism. Errors become one line and exit code 2.
#include "command.hpp"
#include <cpdit/pipeline/same_across_ranks.hpp>

#include <cpdit/core/error.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace {

// Edits (insertions, deletions, substitutions) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A typed flag that `command` does not have, with its closest flag when one is a few edits away
// ("--stpes": "--steps"); empty when every flag typed is the command's.
bool option_group(const CLI::App* app) { return dynamic_cast<const CLI::Option_group*>(app) != nullptr; }

// The long flags of `app` and of its option groups (CLI11 keeps a group as a subcommand).
void add_long_flags(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  for (const CLI::App* group : app.get_subcommands(option_group))
    add_long_flags(*group, names);
}

std::string unknown_flag(const CLI::App& command, int argc, char** argv) {
  // A command of commands (bench) leaves the flags to the one named after it.
  if (!command.get_subcommands([](const CLI::App* a) { return !option_group(a); }).empty()) return "";
  std::vector<std::string> names;
  add_long_flags(command, names);
  for (int i = 2; i < argc; ++i) {
    std::string typed = argv[i];
    if (typed.rfind("--", 0) != 0 || typed == "--") continue;
    typed = typed.substr(0, typed.find('='));
    if (std::find(names.begin(), names.end(), typed) != names.end()) continue;
    std::string best;
    size_t nearest = typed.size() / 3 + 1;  // more edits than a third of the word is another word
    for (const std::string& name : names)
      if (const size_t d = edit_distance(typed, name); d < nearest) {
        nearest = d;
        best = name;
      }
    // None a few edits away: the (at most three) flags that the typed word of 3 letters or more begins,
    // as "--cfg" begins --cfg-parallel.
    if (best.empty() && typed.size() >= 5) {
      std::vector<std::string> longer;
      for (const std::string& name : names)
        if (name.size() > typed.size() && name.rfind(typed, 0) == 0) longer.push_back(name);
      if (longer.size() <= 3)
        for (const std::string& name : longer) best += (best.empty() ? "" : " or ") + name;
    }
    return "unknown flag " + typed + " of '" + command.get_name() + "'" +
           (best.empty() ? "" : "; did you mean " + best + "?");
  }
  return "";
}

// CLI11 answers an unknown command with "A subcommand is required": name it and the choices; an
// unknown flag with the flags it did not expect: name the closest one.
// CLI11's wordings that name its internals, in words: "--steps: At Most 1 required but received 2",
// "--preset: 1 required TEXT missing", "Exactly 1 option from [...] is required and 2 were given".
std::string in_words(const std::string& what) {
  const auto ends = [&](const std::string& tail) {
    return what.size() > tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0;
  };
  const size_t colon = what.find(": ");
  const std::string flag = what.substr(0, colon);
  static const std::string kRepeated = ": At Most 1 required but received ";
  if (const size_t at = what.find(kRepeated); at != std::string::npos)
    return flag + " was given " + what.substr(at + kRepeated.size()) + " times; give it once";
  if (colon != std::string::npos && ends(" missing") && what.find(" required ", colon) != std::string::npos)
    return flag + " needs a value";
  // generate's model group takes --transformer FILE alone or beside --model DIR: "At least 1 option".
  for (const std::string one_of : {"Exactly 1 option from [", "At least 1 option from ["}) {
    if (what.rfind(one_of, 0) != 0) continue;
    const std::string options = what.substr(one_of.size(), what.find(']') - one_of.size());
    return ends(" were given") ? "give one of " + options + ", not several" : "give one of " + options;
  }
  return what;
}

std::string parse_error_text(const CLI::App& root, int argc, char** argv, const CLI::ParseError& e) {
  if (argc < 2 || argv[1][0] == '-') return in_words(e.what());
  std::string names;
  for (const CLI::App* command : root.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->get_name() == argv[1]) {
      const std::string unknown =
          dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr ? unknown_flag(*command, argc, argv) : "";
      return unknown.empty() ? in_words(e.what()) : unknown;
    }
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  return "unknown command '" + std::string(argv[1]) + "'; the commands are " + names;
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit, write() then fails with EFBIG and the error names the file, instead of
  // the signal ending the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App root{"cpdit " CPDIT_VERSION
                ": runs diffusion transformers with context parallelism (ring, Ulysses and unified "
                "attention) across local ranks or Open MPI processes."};
  root.set_version_flag("--version", "cpdit " CPDIT_VERSION);
  root.require_subcommand(1);
  cpdit::app::add_all_commands(root);
  try {
    cpdit::pipeline::check_same_arguments_across_ranks(argc, argv);
    root.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return root.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (cpdit diff --tolerance)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {  // CLI11 would print two lines without the prefix
    std::fprintf(stderr, "cpdit: error: %s (see --help)\n", parse_error_text(root, argc, argv, e).c_str());
    return 2;
  } catch (const cpdit::Error& e) {
    std::fprintf(stderr, "cpdit: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // the operating system refused, e.g. a link loop
    std::fprintf(stderr, "cpdit: error: cannot read %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpdit: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
