// C++ virtual calls.
#include <cstdio>

struct Shape {
	virtual ~Shape() {}
	virtual int area() const = 0;
};
struct Sq : Shape {
	int s;
	explicit Sq(int v) : s(v) {}
	int area() const override { return s * s; }
};
struct Rect : Shape {
	int w, h;
	Rect(int a, int b) : w(a), h(b) {}
	int area() const override { return w * h; }
};

__attribute__((noinline)) static int total(Shape *const *v, int n)
{
	int t = 0;
	for (int i = 0; i < n; i++)
		t += v[i]->area();
	return t;
}

int main()
{
	Shape *v[6];
	for (int i = 0; i < 6; i++)
		v[i] = i & 1 ? static_cast<Shape *>(new Sq(i))
			     : static_cast<Shape *>(new Rect(i, i + 1));
	std::printf("%d\n", total(v, 6));
	for (int i = 0; i < 6; i++)
		delete v[i];
	return 0;
}
