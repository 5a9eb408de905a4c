#include <cstdio>
#include "frost/frost.h"
int main() { std::printf("frost %s\n", frost::version_string()); return 0; }
