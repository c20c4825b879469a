// The one main() of every test binary; doctest exits non-zero on any failure.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
