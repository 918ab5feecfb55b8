// A C++ exception thrown through three frames.
#include <cstdio>
#include <stdexcept>

__attribute__((noinline)) static void f3(int x)
{
	if (x > 0)
		throw std::runtime_error("deep");
}
__attribute__((noinline)) static void f2(int x) { f3(x); std::puts("f2"); }
__attribute__((noinline)) static void f1(int x) { f2(x); std::puts("f1"); }

int main(int argc, char **)
{
	int caught = 0;
	for (int i = 0; i < 2; i++) {
		try {
			f1(argc);
		} catch (const std::exception &e) {
			caught++;
		}
	}
	std::printf("%d\n", caught);
	return 0;
}
