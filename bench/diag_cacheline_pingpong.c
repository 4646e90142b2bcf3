/* Diagnostic for issue 29 item 0 (bench/RESULTS.md, Run M2): the one-way time of a cache
 * line passed between two threads pinned to CPU 0 and CPU 1, printed every 0.5 s, no MPI and
 * no beoperf.  On a VM it shows which state the host's placement of the two vCPUs is in (an
 * MPI ping-pong over shared memory moves with it).
 * Build and run:  gcc -O2 -pthread -o /tmp/cl bench/diag_cacheline_pingpong.c && /tmp/cl 10 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <stdatomic.h>
#include <stdlib.h>
static _Atomic long ball __attribute__((aligned(64)));
static _Atomic int quit;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static void *pong(void *a){pin(1);long v=1;while(!atomic_load(&quit)){if(atomic_load_explicit(&ball,memory_order_acquire)==v){atomic_store_explicit(&ball,v+1,memory_order_release);v+=2;}}return a;}
int main(int argc,char**argv){pthread_t t;pthread_create(&t,0,pong,0);pin(0);long v=0;int secs=argc>1?atoi(argv[1]):10;
 for(int k=0;k<secs*2;k++){double t0=now();long n=0;while(now()-t0<0.5){for(int i=0;i<1000;i++){atomic_store_explicit(&ball,v+1,memory_order_release);while(atomic_load_explicit(&ball,memory_order_acquire)!=v+2);v+=2;}n+=1000;}
  printf("%.1f %.1f ns one-way\n",k*0.5,(now()-t0)/n/2*1e9);fflush(stdout);}
 atomic_store(&quit,1);pthread_join(t,0);return 0;}
