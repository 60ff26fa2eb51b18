#pragma once
// The check of an error path: the call throws cpdit::Error and its one-line message names what the
// user must fix (every one of `parts`).
#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace cpdit::testing {

template <class Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a cpdit::Error mentioning " << *parts.begin();
  } catch (const cpdit::Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << part;
  }
}

}  // namespace cpdit::testing
