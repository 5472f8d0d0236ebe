// The unit-test executable's entry point (doctest). Each test file sits beside this one.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
