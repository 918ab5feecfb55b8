// A C++ exception thrown through four frames, N times (argv[1], default
// 20): the tree's depth must not grow with N.  g++ -O2 puts the handler in
// main.cold; Debian 12's libgcc_s reaches it with an indirect jmp, no ret.
// The thrown object is a plain struct: no allocation beyond the
// exception's own, to keep the recording small.
#include <cstdlib>

struct Thrown {
	int v;
};

static volatile int sink;
static volatile int armed = 1;

// Throws only when armed (always): a g4 that always throws would make g3,
// g2 and g1 noreturn too, and the whole loop, not only the handler, would
// be main.cold.
__attribute__((noinline)) static void g4(int i)
{
	sink = i;
	if (armed)
		throw Thrown{i};
}
__attribute__((noinline)) static void g3(int i) { g4(i); sink = 3; }
__attribute__((noinline)) static void g2(int i) { g3(i); sink = 2; }
__attribute__((noinline)) static void g1(int i) { g2(i); sink = 1; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 20;
	int caught = 0;

	for (int i = 0; i < n; i++) {
		try {
			g1(i);
		} catch (const Thrown &t) {
			caught += t.v == i;
		}
	}
	return caught == n ? 0 : 1;
}
