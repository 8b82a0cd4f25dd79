"""interactions"""
