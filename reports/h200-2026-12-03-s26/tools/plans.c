/* plans.c: the small-M plans of one chunk per warp and of two (QVET_WO_SMALL=swap / swap2) for
 * the four-layer shapes of Llama-3-70B and Llama-2-7B, M = 1, 4, 8, as make_plan computes them on
 * the host (no GPU). Build against a build tree: gcc -std=c11 -Iinclude -Ikernels plans.c
 * build/libqvet.a (LDLIBS of the Makefile); output: plans.txt. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "qvet/variant.h"
#include "../kernels/wonly_small.cuh"
int main(int argc,char**argv){
  const char *rows[]={"marlin-fp8a16-ch-f16","marlin-fp8a16-g128-f16","marlin-fp8a16-tensor-f16","marlin-w8a16-ch-f16","marlin-w8a16-g128-f16","marlin-w4a16-ch-f16","marlin-w4a16-g128-f16","marlin-w4a16-g64-f16","marlin-w4a16-g32-f16","marlin-w4a16-g128-zp-f16","marlin-w4a16-g128-act-f16",0};
  int shp[][3]={{8192,10240,8192},{8192,8192,8192},{8192,57344,8192},{28672,8192,28672},{4096,12288,4096},{4096,4096,4096},{4096,22016,4096},{11008,4096,11008}};
  const char *ln[]={"70b-qkv","70b-o","70b-gu","70b-down","7b-qkv","7b-o","7b-gu","7b-down"};
  for(int r=0;rows[r];r++){ const qv_variant*v=qv_variant_find(rows[r]);
   for(int s=0;s<8;s++) for(int m=1;m<=8;m*=2){ if(m==2)continue;
    for(int cpw=1;cpw<=2;cpw++){ setenv("QVET_WO_SMALL",cpw==2?"swap2":"swap",1);
     qv_wo_small_plan_info p; qv_wonly_small_plan_info(v,m,shp[s][1],shp[s][0],&p);
     printf("%-26s %-9s M=%d cpw=%d grid=%dx%d=%d tps=%d C=%d\n",rows[r],ln[s],m,p.cpw,p.n_blocks,p.splits,p.n_blocks*p.splits,p.tiles_per_split,p.cluster);}}}
}
