/* A blocking syscall that signals interrupt and the kernel restarts
 * (SA_RESTART): each handler returns to the syscall instruction itself,
 * which runs again; no call.  A forked child ends the wait; the recording
 * is of the parent alone (the log engine reads the child's log lines as
 * the parent's: tests/test_record.sh runs this with the tcg engine
 * only). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int hits;

static void on_alarm(int s)
{
	(void) s;
	hits++;
}

__attribute__((noinline)) static int wait_byte(int fd)
{
	char c;

	return (int) read(fd, &c, 1);
}

int main(void)
{
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa;
	int p[2], r;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	if (pipe(p) < 0)
		return 1;
	setitimer(ITIMER_REAL, &it, NULL);
	if (fork() == 0) {
		usleep(150000);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		_exit(0);
	}
	r = wait_byte(p[0]);
	setitimer(ITIMER_REAL, &off, NULL);
	wait(NULL);
	printf("read %d after %d signals\n", r, hits > 0);
	return 0;
}
