#pragma once
// Test helper: the statement must throw IrError whose message contains every given piece.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "cc/ir/error.h"

#define EXPECT_IR_ERROR(statement, ...)                                           \
  do {                                                                            \
    try {                                                                         \
      statement;                                                                  \
      ADD_FAILURE() << "expected IrError from: " #statement;                      \
    } catch (const ::mj::ir::IrError& e) {                                        \
      const std::string message = e.what();                                       \
      for (const char* piece : std::initializer_list<const char*>{__VA_ARGS__}) { \
        EXPECT_NE(message.find(piece), std::string::npos)                         \
            << "message of " #statement " lacks '" << piece << "': " << message;  \
      }                                                                           \
    }                                                                             \
  } while (0)
